package chip_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/runtime/blackhole/access"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/fake"
	"github.com/tcc-dev/tcc/runtime/blackhole/chip"
)

// TestPollTimeout: on a simulated chip (SimClockHz, which Open sets for
// ttsim) the watchdog's bound is simulated time, the cycles Poll lets the
// chip run, whatever the host's wall time; on a card (SimClockHz 0; the
// fake opens as one) it is wall time.
func TestPollTimeout(t *testing.T) {
	slow := func(calls *int, doneAt int) func() (bool, error) {
		return func() (bool, error) {
			*calls++
			time.Sleep(3 * time.Millisecond) // a host slower than the bound
			return *calls == doneAt, nil
		}
	}
	for _, tc := range []struct {
		name    string
		clockHz float64
		timeout time.Duration
		doneAt  int // the call that reports done; 0: never
		// wantCycles is the TimeoutError's Cycles (-1: no error).
		wantCycles int64
		wantErr    string
	}{
		{"simulated: slow host, done in time", 1e9, time.Millisecond, 3, -1, ""},
		{"simulated: the bound in cycles", 1e6, 5 * time.Millisecond, 0, 5000, "timed out after 5ms of simulated time (5000 cycles): core (1,2)"},
		{"card: wall time", 0, time.Millisecond, 0, 0, "timed out after 1ms: core (1,2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fake.New()
			c, err := chip.Open(access.NewBARDevice(f), nil)
			require.NoError(t, err)
			require.Zero(t, c.SimClockHz, "the fake opens as a card")
			c.SimClockHz = tc.clockHz
			calls := 0
			err = c.Poll(tc.timeout, func() string { return "core (1,2)" }, slow(&calls, tc.doneAt))
			if tc.wantCycles < 0 {
				require.NoError(t, err)
				require.Equal(t, tc.doneAt, calls)
				return
			}
			var te *chip.TimeoutError
			require.True(t, errors.As(err, &te), "error %v", err)
			require.Equal(t, tc.wantCycles, te.Cycles)
			require.True(t, strings.Contains(err.Error(), tc.wantErr), "error %q, want %q", err, tc.wantErr)
			if tc.clockHz > 0 {
				require.Equal(t, int(tc.wantCycles), f.Cycles(), "the chip ran the bound's cycles")
			}
		})
	}
}
