package kafka

// Helpers of the per-item authorization rules: most Kafka APIs name many
// resources, serve the authorized ones and answer each denied one with its
// own error entry, in the same response (KafkaApis filters the request the
// same way before handing it to the handler).

import "github.com/twmb/franz-go/pkg/kmsg"

// splitAllowed splits a request's items into those allowed, in order, and
// those denied. With none denied it returns items itself, so the common
// case allocates nothing; otherwise keep is a new array (the request's own
// is never rewritten in place).
func splitAllowed[T any](items []T, allowed func(T) bool) (keep, denied []T) {
	return splitCoded(items, func(t T) int16 {
		if allowed(t) {
			return 0
		}
		return -1
	}, func(t T, _ int16) T { return t })
}

// coded is a denied item with the error it answers.
type coded[T any] struct {
	item T
	code int16
}

// splitDenials is splitAllowed for rules whose items are denied with
// different errors (a whole-request denial applied per item, or a topic
// denial): code returns 0 for an allowed item.
func splitDenials[T any](items []T, code func(T) int16) (keep []T, denied []coded[T]) {
	return splitCoded(items, code, func(t T, c int16) coded[T] { return coded[T]{t, c} })
}

func splitCoded[T, D any](items []T, code func(T) int16, denial func(T, int16) D) (keep []T, denied []D) {
	first := -1
	for i, t := range items {
		if c := code(t); c != 0 {
			first = i
			denied = append(denied, denial(t, c))
			break
		}
	}
	if first < 0 {
		return items, nil
	}
	keep = append(make([]T, 0, len(items)-1), items[:first]...)
	for _, t := range items[first+1:] {
		if c := code(t); c != 0 {
			denied = append(denied, denial(t, c))
		} else {
			keep = append(keep, t)
		}
	}
	return keep, denied
}

// answerDenied is the decision of a rule that removed the denied items
// from the request: none denied, no decision; nothing left, the handler is
// not run (empty) and the blank answer carries only the denials; add
// appends one denied item's error entry to the answer.
func answerDenied[R kmsg.Response, T any](kept int, denied []T, add func(R, T)) authzDecision {
	if len(denied) == 0 {
		return authzDecision{}
	}
	return authzDecision{empty: kept == 0, patch: func(p kmsg.Response) {
		resp := p.(R)
		for _, t := range denied {
			add(resp, t)
		}
	}}
}
