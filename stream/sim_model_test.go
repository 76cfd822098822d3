package stream

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The linearizability model of the simulator: a set of independent streams
// (porcupine partitions), each a sequence of entries with a start offset.
//
// An entry is rendered ";<payload>@<offset>+<records>", and a stream's
// entries are the concatenation in offset order, so states compare as
// values. Appends are identified by their payloads' common prefix (the
// append ID); an append may be repeated (a retry with the same producer
// sequence) but its payloads may appear in the stream at most once.

type simState struct {
	start, end int64
	entries    string
}

// simAppendIn is an append: its ID and the record counts of its entries.
type simAppendIn struct {
	stream int
	id     string
	counts []uint32
}

type simOutcome uint8

const (
	outOK         simOutcome = iota + 1 // committed at start
	outDuplicate                        // committed earlier, at start
	outDroppedDup                       // dropped as a duplicate of an older sequence (offsets unknown)
	outFailed                           // definitely not committed
	outUnknown                          // maybe committed
)

type simAppendOut struct {
	outcome simOutcome
	start   int64
}

type simReadIn struct {
	stream int
	from   int64
}

type simReadOut struct {
	outOfRange bool
	start, end int64
	entries    string
}

type simTrimIn struct {
	stream int
	to     int64
}

type simTrimOut struct{ unknown bool }

func payloadOf(id string, k int) string { return id + "." + strconv.Itoa(k) }

func entryString(payload string, off int64, count uint32) string {
	return ";" + payload + "@" + strconv.FormatInt(off, 10) + "+" + strconv.FormatUint(uint64(count), 10)
}

func (s simState) with(in simAppendIn) simState {
	var b strings.Builder
	b.WriteString(s.entries)
	off := s.end
	for k, c := range in.counts {
		b.WriteString(entryString(payloadOf(in.id, k), off, c))
		off += int64(c)
	}
	return simState{start: s.start, end: off, entries: b.String()}
}

func (s simState) has(id string) bool { return strings.Contains(s.entries, ";"+id+".0@") }

func (s simState) hasAt(id string, start int64) bool {
	return strings.Contains(s.entries, ";"+id+".0@"+strconv.FormatInt(start, 10)+"+")
}

// from renders the entries whose range ends after offset from.
func (s simState) from(from int64) string {
	rest := s.entries
	for rest != "" {
		next := strings.IndexByte(rest[1:], ';')
		var cur string
		if next < 0 {
			cur = rest
		} else {
			cur = rest[:next+1]
		}
		at := strings.LastIndexByte(cur, '@')
		plus := strings.LastIndexByte(cur, '+')
		off, _ := strconv.ParseInt(cur[at+1:plus], 10, 64)
		cnt, _ := strconv.ParseInt(cur[plus+1:], 10, 64)
		if off+cnt > from {
			return rest
		}
		if next < 0 {
			return ""
		}
		rest = rest[next+1:]
	}
	return ""
}

// simModel returns the model; trackStart is false for the owner's view,
// which learns of trims by other processes only at its next commit.
func simModel(trackStart bool) porcupine.Model {
	nm := &porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[int][]porcupine.Operation{}
			var keys []int
			for _, op := range history {
				k := streamOf(op.Input)
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{simState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			st := state.(simState)
			switch in := input.(type) {
			case simAppendIn:
				out := output.(simAppendOut)
				switch out.outcome {
				case outOK:
					if out.start != st.end || st.has(in.id) {
						return nil
					}
					return []interface{}{st.with(in)}
				case outDuplicate:
					if !st.hasAt(in.id, out.start) {
						return nil
					}
					return []interface{}{st}
				case outDroppedDup, outFailed:
					return []interface{}{st}
				default:
					if st.has(in.id) {
						return []interface{}{st}
					}
					return []interface{}{st, st.with(in)}
				}
			case simReadIn:
				out := output.(simReadOut)
				if out.outOfRange {
					if trackStart && (in.from < st.start || in.from > st.end) && out.start == st.start && out.end == st.end {
						return []interface{}{st}
					}
					return nil
				}
				if out.end != st.end || (trackStart && out.start != st.start) || out.entries != st.from(in.from) {
					return nil
				}
				return []interface{}{st}
			case simTrimIn:
				out := output.(simTrimOut)
				next := st
				next.start = max(st.start, min(in.to, st.end))
				if out.unknown {
					return []interface{}{st, next}
				}
				return []interface{}{next}
			}
			panic(fmt.Sprintf("sim model: unexpected input %T", input))
		},
		DescribeOperation: func(input, output interface{}) string {
			return fmt.Sprintf("%+v -> %+v", input, output)
		},
	}
	return nm.ToModel()
}

func streamOf(input interface{}) int {
	switch in := input.(type) {
	case simAppendIn:
		return in.stream
	case simReadIn:
		return in.stream
	case simTrimIn:
		return in.stream
	}
	return -1
}
