package meta

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed marks znode data that is not valid BookKeeper ledger
// metadata, or metadata in a format version this package does not read.
var ErrMalformed = errors.New("bookkeeper/meta: malformed ledger metadata")

// State is the ledger lifecycle state in metadata.
type State int32

const (
	StateOpen       State = 1
	StateInRecovery State = 2
	StateClosed     State = 3
)

func (s State) String() string {
	switch s {
	case StateOpen:
		return "OPEN"
	case StateInRecovery:
		return "IN_RECOVERY"
	case StateClosed:
		return "CLOSED"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Segment is one ensemble: the bookies (by bookie ID, in ensemble index
// order) that hold entries from FirstEntryID up to the next segment's first
// entry.
type Segment struct {
	FirstEntryID int64
	Ensemble     []string
}

// LedgerMetadata is the content of a ledger znode.
type LedgerMetadata struct {
	EnsembleSize int32
	WriteQuorum  int32
	AckQuorum    int32
	State        State
	// LastEntryID and Length are meaningful only when State is CLOSED
	// (Java writes -1 and 0 otherwise).
	LastEntryID int64
	Length      int64
	Segments    []Segment
	DigestType  proto.DigestType
	// Password is the raw ledger password; the master key is derived from it.
	Password []byte
	// CtimeMillis is the creation time in Unix milliseconds; HasCtime says
	// whether it is stored.
	CtimeMillis int64
	HasCtime    bool
	Custom      map[string][]byte
	// CToken is a random positive token drawn at create.
	CToken    int64
	HasCToken bool
}

// Validate applies the checks BookKeeper applies when it builds or parses
// metadata (LedgerMetadataImpl, LedgerMetadataBuilder).
func (m *LedgerMetadata) Validate() error {
	if m.EnsembleSize < 1 || m.WriteQuorum < 1 || m.AckQuorum < 1 ||
		m.EnsembleSize < m.WriteQuorum || m.WriteQuorum < m.AckQuorum {
		return fmt.Errorf("%w: quorums must satisfy E >= WQ >= AQ >= 1 (E=%d WQ=%d AQ=%d)",
			ErrMalformed, m.EnsembleSize, m.WriteQuorum, m.AckQuorum)
	}
	if len(m.Segments) == 0 {
		return fmt.Errorf("%w: no ensemble segment", ErrMalformed)
	}
	prev := int64(-1)
	for i, s := range m.Segments {
		if len(s.Ensemble) != int(m.EnsembleSize) {
			return fmt.Errorf("%w: segment %d has %d bookies, ensemble size %d", ErrMalformed, i, len(s.Ensemble), m.EnsembleSize)
		}
		if s.FirstEntryID < 0 || (i > 0 && s.FirstEntryID <= prev) || (i == 0 && s.FirstEntryID != 0) {
			return fmt.Errorf("%w: segment %d first entry %d out of order", ErrMalformed, i, s.FirstEntryID)
		}
		prev = s.FirstEntryID
		seen := map[string]bool{}
		for _, b := range s.Ensemble {
			if b == "" || seen[b] {
				return fmt.Errorf("%w: segment %d has an empty or repeated bookie %q", ErrMalformed, i, b)
			}
			seen[b] = true
		}
	}
	switch m.State {
	case StateOpen, StateInRecovery:
	case StateClosed:
		if m.LastEntryID < -1 || m.Length < 0 {
			return fmt.Errorf("%w: closed ledger with lastEntryId %d length %d", ErrMalformed, m.LastEntryID, m.Length)
		}
	default:
		return fmt.Errorf("%w: unknown state %d", ErrMalformed, m.State)
	}
	if !m.DigestType.Valid() {
		return fmt.Errorf("%w: unknown digest type %d", ErrMalformed, m.DigestType)
	}
	return nil
}

// SegmentFor returns the ensemble that holds entry e: the segment with the
// largest FirstEntryID <= e.
func (m *LedgerMetadata) SegmentFor(e int64) *Segment {
	i := sort.Search(len(m.Segments), func(i int) bool { return m.Segments[i].FirstEntryID > e }) - 1
	if i < 0 {
		i = 0
	}
	return &m.Segments[i]
}

// Last returns the last segment.
func (m *LedgerMetadata) Last() *Segment { return &m.Segments[len(m.Segments)-1] }

// Clone returns a deep copy.
func (m *LedgerMetadata) Clone() *LedgerMetadata {
	c := *m
	c.Segments = make([]Segment, len(m.Segments))
	for i, s := range m.Segments {
		c.Segments[i] = Segment{FirstEntryID: s.FirstEntryID, Ensemble: append([]string(nil), s.Ensemble...)}
	}
	c.Password = append([]byte(nil), m.Password...)
	if m.Custom != nil {
		c.Custom = make(map[string][]byte, len(m.Custom))
		for k, v := range m.Custom {
			c.Custom[k] = append([]byte(nil), v...)
		}
	}
	return &c
}

const headerV3 = "BookieMetadataFormatVersion\t3\n"

// Marshal encodes m as format v3 znode data. Custom metadata is written in
// key order so the bytes are deterministic.
func Marshal(m *LedgerMetadata) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(m.WriteQuorum)))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(m.EnsembleSize)))
	length, last := m.Length, m.LastEntryID
	if m.State != StateClosed {
		length, last = 0, -1
	}
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(length))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(last))
	b = protowire.AppendTag(b, 5, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.State))
	for _, s := range m.Segments {
		var sb []byte
		for _, id := range s.Ensemble {
			sb = protowire.AppendTag(sb, 1, protowire.BytesType)
			sb = protowire.AppendString(sb, id)
		}
		sb = protowire.AppendTag(sb, 2, protowire.VarintType)
		sb = protowire.AppendVarint(sb, uint64(s.FirstEntryID))
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendBytes(b, sb)
	}
	b = protowire.AppendTag(b, 7, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.DigestType))
	b = protowire.AppendTag(b, 8, protowire.BytesType)
	b = protowire.AppendBytes(b, m.Password)
	b = protowire.AppendTag(b, 9, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(m.AckQuorum)))
	if m.HasCtime {
		b = protowire.AppendTag(b, 10, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m.CtimeMillis))
	}
	keys := make([]string, 0, len(m.Custom))
	for k := range m.Custom {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var eb []byte
		eb = protowire.AppendTag(eb, 1, protowire.BytesType)
		eb = protowire.AppendString(eb, k)
		eb = protowire.AppendTag(eb, 2, protowire.BytesType)
		eb = protowire.AppendBytes(eb, m.Custom[k])
		b = protowire.AppendTag(b, 11, protowire.BytesType)
		b = protowire.AppendBytes(b, eb)
	}
	if m.HasCToken {
		b = protowire.AppendTag(b, 12, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m.CToken))
	}
	out := make([]byte, 0, len(headerV3)+5+len(b))
	out = append(out, headerV3...)
	out = protowire.AppendVarint(out, uint64(len(b)))
	return append(out, b...), nil
}

// Unmarshal decodes znode data. Only format version 3 is read; versions 1
// and 2 (text formats of BookKeeper < 4.9) are refused with ErrMalformed.
func Unmarshal(data []byte) (*LedgerMetadata, error) {
	const key = "BookieMetadataFormatVersion\t"
	if !bytes.HasPrefix(data, []byte(key)) {
		return nil, fmt.Errorf("%w: missing format header", ErrMalformed)
	}
	rest := data[len(key):]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 || nl > 10 {
		return nil, fmt.Errorf("%w: unterminated format version", ErrMalformed)
	}
	if v := string(rest[:nl]); v != "3" {
		return nil, fmt.Errorf("%w: metadata format version %q; only version 3 (BookKeeper >= 4.9) is supported", ErrMalformed, v)
	}
	rest = rest[nl+1:]
	n, k := protowire.ConsumeVarint(rest)
	if k < 0 || n > uint64(len(rest)-k) {
		return nil, fmt.Errorf("%w: bad message length", ErrMalformed)
	}
	msg := rest[k : k+int(n)]
	m := &LedgerMetadata{LastEntryID: -1}
	var have struct{ wq, e, length, state, ack bool }
	for len(msg) > 0 {
		num, typ, tl := protowire.ConsumeTag(msg)
		if tl < 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrMalformed)
		}
		msg = msg[tl:]
		var v uint64
		var bs []byte
		var vl int
		switch typ {
		case protowire.VarintType:
			v, vl = protowire.ConsumeVarint(msg)
		case protowire.BytesType:
			bs, vl = protowire.ConsumeBytes(msg)
		default:
			vl = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if vl < 0 {
			return nil, fmt.Errorf("%w: bad value of field %d", ErrMalformed, num)
		}
		msg = msg[vl:]
		wantVarint := func() error {
			if typ != protowire.VarintType {
				return fmt.Errorf("%w: field %d has wire type %d", ErrMalformed, num, typ)
			}
			return nil
		}
		wantBytes := func() error {
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: field %d has wire type %d", ErrMalformed, num, typ)
			}
			return nil
		}
		var err error
		switch num {
		case 1:
			err = wantVarint()
			m.WriteQuorum, have.wq = int32(v), true
		case 2:
			err = wantVarint()
			m.EnsembleSize, have.e = int32(v), true
		case 3:
			err = wantVarint()
			m.Length, have.length = int64(v), true
		case 4:
			err = wantVarint()
			m.LastEntryID = int64(v)
		case 5:
			err = wantVarint()
			m.State, have.state = State(v), true
		case 6:
			if err = wantBytes(); err == nil {
				var s Segment
				s, err = unmarshalSegment(bs)
				m.Segments = append(m.Segments, s)
			}
		case 7:
			err = wantVarint()
			m.DigestType = proto.DigestType(v)
		case 8:
			err = wantBytes()
			m.Password = append([]byte{}, bs...)
		case 9:
			err = wantVarint()
			m.AckQuorum, have.ack = int32(v), true
		case 10:
			err = wantVarint()
			m.CtimeMillis, m.HasCtime = int64(v), true
		case 11:
			if err = wantBytes(); err == nil {
				var k string
				var val []byte
				k, val, err = unmarshalCustom(bs)
				if m.Custom == nil {
					m.Custom = map[string][]byte{}
				}
				m.Custom[k] = val
			}
		case 12:
			err = wantVarint()
			m.CToken, m.HasCToken = int64(v), true
		}
		if err != nil {
			return nil, err
		}
	}
	if !have.wq || !have.e || !have.length || !have.state {
		return nil, fmt.Errorf("%w: a required field is missing", ErrMalformed)
	}
	if !have.ack {
		// Metadata written before ack quorums existed: AQ = WQ (decodeFormat).
		m.AckQuorum = m.WriteQuorum
	}
	if m.Password == nil {
		// BookKeeper pairs digest type and password; Java writes an empty
		// password rather than none. A ledger without either has DigestType
		// 0, which Validate rejects: nothing to verify entries with.
		m.Password = []byte{}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func unmarshalSegment(b []byte) (Segment, error) {
	var s Segment
	haveFirst := false
	for len(b) > 0 {
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return s, fmt.Errorf("%w: bad segment tag", ErrMalformed)
		}
		b = b[tl:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return s, fmt.Errorf("%w: bad ensemble member", ErrMalformed)
			}
			s.Ensemble = append(s.Ensemble, v)
			b = b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return s, fmt.Errorf("%w: bad firstEntryId", ErrMalformed)
			}
			s.FirstEntryID, haveFirst = int64(v), true
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return s, fmt.Errorf("%w: bad segment field %d", ErrMalformed, num)
			}
			b = b[n:]
		}
	}
	if !haveFirst {
		return s, fmt.Errorf("%w: segment without firstEntryId", ErrMalformed)
	}
	return s, nil
}

func unmarshalCustom(b []byte) (string, []byte, error) {
	var k string
	var v []byte
	for len(b) > 0 {
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return "", nil, fmt.Errorf("%w: bad custom metadata tag", ErrMalformed)
		}
		b = b[tl:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			s, n := protowire.ConsumeString(b)
			if n < 0 {
				return "", nil, fmt.Errorf("%w: bad custom metadata key", ErrMalformed)
			}
			k, b = s, b[n:]
		case num == 2 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", nil, fmt.Errorf("%w: bad custom metadata value", ErrMalformed)
			}
			v, b = append([]byte{}, s...), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return "", nil, fmt.Errorf("%w: bad custom metadata field", ErrMalformed)
			}
			b = b[n:]
		}
	}
	return k, v, nil
}
