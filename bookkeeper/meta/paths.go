package meta

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// DefaultLedgersRoot is BookKeeper's default ledgers root path.
const DefaultLedgersRoot = "/ledgers"

// Layout names the ledger manager recorded in <root>/LAYOUT. Only the two
// hierarchical managers are supported; flat and MS layouts are refused.
type Layout int

const (
	// LayoutHierarchical is HierarchicalLedgerManagerFactory (BookKeeper's
	// default): the short 2-4-4 path below Integer.MAX_VALUE, the long
	// 3-4-4-4-4 path from there on.
	LayoutHierarchical Layout = iota + 1
	// LayoutLongHierarchical is LongHierarchicalLedgerManagerFactory: the
	// long path for every ID.
	LayoutLongHierarchical
)

// ParseLayout parses <root>/LAYOUT: "<layoutFormatVersion>\n<factoryClass>:<managerVersion>".
// Factory class names are matched by suffix because shaded builds rename
// the package.
func ParseLayout(data []byte) (Layout, error) {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		return 0, fmt.Errorf("bookkeeper/meta: LAYOUT %q: want two lines", data)
	}
	if v, err := strconv.Atoi(strings.TrimSpace(lines[0])); err != nil || v < 1 || v > 2 {
		return 0, fmt.Errorf("bookkeeper/meta: LAYOUT format version %q not supported", lines[0])
	}
	class, _, _ := strings.Cut(strings.TrimSpace(lines[1]), ":")
	switch {
	case strings.HasSuffix(class, ".LongHierarchicalLedgerManagerFactory"):
		return LayoutLongHierarchical, nil
	case strings.HasSuffix(class, ".HierarchicalLedgerManagerFactory"):
		return LayoutHierarchical, nil
	}
	return 0, fmt.Errorf("bookkeeper/meta: ledger manager %q is not supported (want HierarchicalLedgerManagerFactory or LongHierarchicalLedgerManagerFactory)", class)
}

const maxInt32 = 1<<31 - 1

// LedgerPath returns the ledger znode path under root for the layout
// (StringUtils.getHybridHierarchicalLedgerPath /
// getLongHierarchicalLedgerPath). id must be >= 0.
func LedgerPath(root string, layout Layout, id int64) string {
	if layout == LayoutHierarchical && id < maxInt32 {
		s := fmt.Sprintf("%010d", id)
		return root + "/" + s[0:2] + "/" + s[2:6] + "/L" + s[6:10]
	}
	s := fmt.Sprintf("%019d", id)
	return root + "/" + s[0:3] + "/" + s[3:7] + "/" + s[7:11] + "/" + s[11:15] + "/L" + s[15:19]
}

// Well-known paths under the ledgers root.
func AvailablePath(root string) string { return root + "/available" }
func ReadOnlyPath(root string) string  { return root + "/available/readonly" }
func LayoutPath(root string) string    { return root + "/LAYOUT" }

// Endpoint is one endpoint of a bookie's registration record.
type Endpoint struct {
	ID       string
	Port     int32
	Host     string
	Protocol string
}

// ParseBookieServiceInfo decodes the data of <root>/available/<bookieId>
// (BookieServiceInfoFormat) and returns its endpoints.
func ParseBookieServiceInfo(data []byte) ([]Endpoint, error) {
	var eps []Endpoint
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return nil, fmt.Errorf("bookkeeper/meta: bad bookie service info")
		}
		data = data[n:]
		if num == 6 && typ == protowire.BytesType {
			b, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return nil, fmt.Errorf("bookkeeper/meta: bad bookie endpoint")
			}
			data = data[n:]
			ep, err := parseEndpoint(b)
			if err != nil {
				return nil, err
			}
			eps = append(eps, ep)
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			return nil, fmt.Errorf("bookkeeper/meta: bad bookie service info field %d", num)
		}
		data = data[n:]
	}
	return eps, nil
}

func parseEndpoint(b []byte) (Endpoint, error) {
	var ep Endpoint
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ep, fmt.Errorf("bookkeeper/meta: bad endpoint tag")
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 3 || num == 4):
			s, n := protowire.ConsumeString(b)
			if n < 0 {
				return ep, fmt.Errorf("bookkeeper/meta: bad endpoint field %d", num)
			}
			b = b[n:]
			switch num {
			case 1:
				ep.ID = s
			case 3:
				ep.Host = s
			case 4:
				ep.Protocol = s
			}
		case typ == protowire.VarintType && num == 2:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return ep, fmt.Errorf("bookkeeper/meta: bad endpoint port")
			}
			ep.Port, b = int32(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return ep, fmt.Errorf("bookkeeper/meta: bad endpoint field %d", num)
			}
			b = b[n:]
		}
	}
	return ep, nil
}

// AppendBookieServiceInfo encodes a registration record with one
// "bookie-rpc" endpoint (what a bookie writes; used by fakes and tests).
func AppendBookieServiceInfo(dst []byte, host string, port int32) []byte {
	var ep []byte
	ep = protowire.AppendTag(ep, 1, protowire.BytesType)
	ep = protowire.AppendString(ep, "bookie")
	ep = protowire.AppendTag(ep, 2, protowire.VarintType)
	ep = protowire.AppendVarint(ep, uint64(port))
	ep = protowire.AppendTag(ep, 3, protowire.BytesType)
	ep = protowire.AppendString(ep, host)
	ep = protowire.AppendTag(ep, 4, protowire.BytesType)
	ep = protowire.AppendString(ep, "bookie-rpc")
	dst = protowire.AppendTag(dst, 6, protowire.BytesType)
	return protowire.AppendBytes(dst, ep)
}
