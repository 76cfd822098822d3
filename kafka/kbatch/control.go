package kbatch

import (
	"encoding/binary"
	"fmt"
)

// Control record types (the int16 "type" in a control record's key).
const (
	ControlAbort  = 0
	ControlCommit = 1
)

// BuildControl encodes a transaction marker: an uncompressed, transactional
// control batch of one record whose key is (version 0, type) and whose
// value is (version 0, coordinatorEpoch), as Kafka's transaction
// coordinator writes them. baseSequence is -1: markers never take part in
// producer sequencing.
func BuildControl(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, timestamp int64) []byte {
	typ := int16(ControlAbort)
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	return Build(BuildOptions{
		BaseTimestamp: timestamp,
		ProducerID:    producerID,
		ProducerEpoch: producerEpoch,
		BaseSequence:  -1,
		Attributes:    AttrTransactional | AttrControl,
	}, []Record{{Key: key, Value: val}})
}

// ControlType returns the marker type (ControlAbort or ControlCommit) of a
// control batch b. Control batches are always uncompressed; anything that
// is not a well-formed marker is an error.
func ControlType(b []byte) (int16, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return 0, err
	}
	if h.Attributes&AttrControl == 0 {
		return 0, fmt.Errorf("%w: not a control batch", ErrInvalid)
	}
	if h.Codec() != CodecNone || h.NumRecords < 1 || h.TotalSize() > len(b) {
		return 0, fmt.Errorf("%w: malformed control batch", ErrInvalid)
	}
	// First record: length, attributes, timestampDelta, offsetDelta, key.
	rec := b[HeaderSize:h.TotalSize()]
	if _, n := binary.Varint(rec); n <= 0 {
		return 0, fmt.Errorf("%w: control record length", ErrCorrupt)
	} else {
		rec = rec[n:]
	}
	if len(rec) < 1 {
		return 0, fmt.Errorf("%w: control record truncated", ErrCorrupt)
	}
	rec = rec[1:]
	for i := 0; i < 2; i++ {
		_, n := binary.Varint(rec)
		if n <= 0 {
			return 0, fmt.Errorf("%w: control record header", ErrCorrupt)
		}
		rec = rec[n:]
	}
	klen, n := binary.Varint(rec)
	if n <= 0 || klen < 4 || int64(len(rec)-n) < klen {
		return 0, fmt.Errorf("%w: control record key", ErrCorrupt)
	}
	key := rec[n : n+int(klen)]
	typ := int16(binary.BigEndian.Uint16(key[2:]))
	if typ != ControlAbort && typ != ControlCommit {
		return 0, fmt.Errorf("%w: control record type %d", ErrInvalid, typ)
	}
	return typ, nil
}
