package poll

import (
	"errors"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Until(10*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Until = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilGivesTheLastErrorAfterTheDeadline(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Until(100*time.Millisecond, func() error {
		calls++
		return errors.New("still not")
	})
	if err == nil || err.Error() != "still not" {
		t.Fatalf("Until = %v, want the last error", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || calls < 2 {
		t.Fatalf("gave up after %s and %d calls, want the whole timeout and more than one call", took, calls)
	}
}
