package proto

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// AppendReadRequest appends a READ frame (length prefix included). The
// master key is sent iff flags has FlagDoFencing; it must then be non-nil.
func AppendReadRequest(dst []byte, ledgerID, entryID int64, flags uint16, masterKey *[MasterKeyLen]byte) []byte {
	n := ReadRequestLen
	fencing := flags&FlagDoFencing != 0
	if fencing {
		n = FencingReadRequestLen
	}
	start := len(dst)
	dst = grow(dst, 4+n)
	f := dst[start:]
	binary.BigEndian.PutUint32(f[0:], uint32(n))
	binary.BigEndian.PutUint32(f[4:], PacketHeader(CurrentVersion, OpRead, flags))
	binary.BigEndian.PutUint64(f[8:], uint64(ledgerID))
	binary.BigEndian.PutUint64(f[16:], uint64(entryID))
	if fencing {
		copy(f[24:], masterKey[:])
	}
	return dst
}

// Response is a decoded v2 ADD or READ response.
type Response struct {
	Version  uint8
	Op       uint8
	RC       RC
	LedgerID int64
	// EntryID is echoed from the request: LastEntry stays LastEntry on a
	// last-entry read; the real entry ID is in Body's header.
	EntryID int64
	// Body is the stored entry of a successful READ; it aliases the frame.
	Body []byte
}

// ParseResponse decodes one response frame (without its length prefix).
func ParseResponse(frame []byte) (Response, error) {
	if len(frame) < ResponseHeaderLen {
		return Response{}, fmt.Errorf("%w: response of %d bytes, need %d", ErrMalformed, len(frame), ResponseHeaderLen)
	}
	v, op, _ := SplitHeader(binary.BigEndian.Uint32(frame))
	r := Response{
		Version:  v,
		Op:       op,
		RC:       RC(int32(binary.BigEndian.Uint32(frame[4:]))),
		LedgerID: int64(binary.BigEndian.Uint64(frame[8:])),
		EntryID:  int64(binary.BigEndian.Uint64(frame[16:])),
	}
	switch op {
	case OpAdd:
		if len(frame) != ResponseHeaderLen {
			return Response{}, fmt.Errorf("%w: ADD response of %d bytes, want %d", ErrMalformed, len(frame), ResponseHeaderLen)
		}
	case OpRead:
		if len(frame) > ResponseHeaderLen {
			if r.RC != EOK {
				return Response{}, fmt.Errorf("%w: READ response with rc %s carries a body", ErrMalformed, r.RC)
			}
			r.Body = frame[ResponseHeaderLen:]
		}
	default:
		return Response{}, fmt.Errorf("%w: unexpected response opcode %d", ErrMalformed, op)
	}
	return r, nil
}

// AppendResponse appends a response frame (length prefix included); body is
// sent only for READ. Used by the in-process fake bookie.
func AppendResponse(dst []byte, version, op uint8, rc RC, ledgerID, entryID int64, body []byte) []byte {
	start := len(dst)
	dst = grow(dst, 4+ResponseHeaderLen)
	f := dst[start:]
	binary.BigEndian.PutUint32(f[0:], uint32(ResponseHeaderLen+len(body)))
	binary.BigEndian.PutUint32(f[4:], PacketHeader(version, op, 0))
	binary.BigEndian.PutUint32(f[8:], uint32(int32(rc)))
	binary.BigEndian.PutUint64(f[12:], uint64(ledgerID))
	binary.BigEndian.PutUint64(f[20:], uint64(entryID))
	return append(dst, body...)
}

// Request is a decoded v2 ADD or READ request (the bookie's view).
type Request struct {
	Version  uint8
	Op       uint8
	Flags    uint16
	LedgerID int64
	EntryID  int64
	// MasterKey is set for every ADD and for fencing READs (HasKey).
	MasterKey [MasterKeyLen]byte
	HasKey    bool
	// Entry is the stored entry carried by an ADD; it aliases the frame.
	Entry []byte
}

// ParseRequest decodes one request frame (without its length prefix).
func ParseRequest(frame []byte) (Request, error) {
	if len(frame) < 4 {
		return Request{}, fmt.Errorf("%w: request of %d bytes", ErrMalformed, len(frame))
	}
	v, op, flags := SplitHeader(binary.BigEndian.Uint32(frame))
	if v != CurrentVersion {
		return Request{}, fmt.Errorf("%w: protocol version %d, want %d", ErrMalformed, v, CurrentVersion)
	}
	r := Request{Version: v, Op: op, Flags: flags}
	switch op {
	case OpAdd:
		if len(frame) < 4+MasterKeyLen+EntryHeaderLen {
			return Request{}, fmt.Errorf("%w: ADD request of %d bytes", ErrMalformed, len(frame))
		}
		copy(r.MasterKey[:], frame[4:])
		r.HasKey = true
		r.Entry = frame[4+MasterKeyLen:]
		r.LedgerID = int64(binary.BigEndian.Uint64(r.Entry[0:]))
		r.EntryID = int64(binary.BigEndian.Uint64(r.Entry[8:]))
	case OpRead:
		want := ReadRequestLen
		if flags&FlagDoFencing != 0 {
			want = FencingReadRequestLen
		}
		if len(frame) != want {
			return Request{}, fmt.Errorf("%w: READ request of %d bytes, want %d", ErrMalformed, len(frame), want)
		}
		r.LedgerID = int64(binary.BigEndian.Uint64(frame[4:]))
		r.EntryID = int64(binary.BigEndian.Uint64(frame[12:]))
		if want == FencingReadRequestLen {
			copy(r.MasterKey[:], frame[20:])
			r.HasKey = true
		}
	default:
		return Request{}, fmt.Errorf("%w: unsupported request opcode %d", ErrMalformed, op)
	}
	return r, nil
}

// ReadFrame reads one length-prefixed frame from r into buf (grown as
// needed) and returns it without the prefix. A frame longer than maxSize or
// shorter than 4 bytes is ErrMalformed: the stream cannot be resynchronised
// and the connection must be closed.
func ReadFrame(r *bufio.Reader, buf []byte, maxSize int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(lb[:])))
	if n < 4 || n > maxSize {
		return nil, fmt.Errorf("%w: frame length %d outside [4, %d]", ErrMalformed, n, maxSize)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
