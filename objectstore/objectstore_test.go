package objectstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Outcome
	}{
		{nil, Applied},
		{ErrAlreadyExists, Conflict},
		{fmt.Errorf("wrapped: %w", ErrPreconditionFailed), Conflict},
		{ErrConflict, NotApplied},
		{ErrInvalidArgument, NotApplied},
		{ErrNotFound, NotApplied},
		{ErrClosed, NotApplied},
		{fmt.Errorf("x: %w", ErrCorrupt), NotApplied},
		{errors.New("connection reset"), Unknown},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestCheckKey(t *testing.T) {
	good := []string{"a", "a/b", "a.b/c-d_e", "...", ".x/y.", "é/ü", strings.Repeat("s", MaxKeySegmentLen),
		strings.Repeat("a/", MaxKeyLen/2-1) + "zz"}
	bad := []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "nul\x00", "\xff",
		strings.Repeat("s", MaxKeySegmentLen+1), strings.Repeat("a/", MaxKeyLen/2) + "z"}
	for _, k := range good {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%.40q) = %v, want nil", k, err)
		}
	}
	for _, k := range bad {
		if err := CheckKey(k); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckKey(%.40q) = %v, want ErrInvalidArgument", k, err)
		}
	}
}
