package wire

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/nereusstream/nereus-go/pulsar/pb"
)

// unknownVarint finds the first varint field num in raw protobuf bytes.
func unknownVarint(raw []byte, num protowire.Number) (uint64, bool) {
	for len(raw) > 0 {
		n, typ, l := protowire.ConsumeTag(raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
		if n == num && typ == protowire.VarintType {
			v, l := protowire.ConsumeVarint(raw)
			return v, l >= 0
		}
		l = protowire.ConsumeFieldValue(n, typ, raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
	}
	return 0, false
}

// UnknownRequestID extracts the request_id (field 1) of a command whose
// sub-message this codec does not declare (transactions, topic watchers):
// the sub-message sits in BaseCommand field number == the command type.
func UnknownRequestID(cmd *pb.BaseCommand, typ int32) (uint64, bool) {
	raw := cmd.ProtoReflect().GetUnknown()
	for len(raw) > 0 {
		n, wt, l := protowire.ConsumeTag(raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
		if int32(n) == typ && wt == protowire.BytesType {
			sub, l := protowire.ConsumeBytes(raw)
			if l < 0 {
				return 0, false
			}
			return unknownVarint(sub, 1)
		}
		l = protowire.ConsumeFieldValue(n, wt, raw)
		if l < 0 {
			return 0, false
		}
		raw = raw[l:]
	}
	return 0, false
}
