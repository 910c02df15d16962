package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const unlimited = "unlimited"

var sizeSuffixes = []struct {
	suffix string
	factor uint64
}{
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
}

// parseSize reads a byte size: a plain integer or one with a KiB/MiB/GiB suffix.
func parseSize(s string) (uint64, error) {
	factor := uint64(1)
	num := s
	for _, u := range sizeSuffixes {
		if strings.HasSuffix(s, u.suffix) {
			factor, num = u.factor, strings.TrimSuffix(s, u.suffix)
			break
		}
	}
	v, err := strconv.ParseUint(strings.TrimSpace(num), 10, 64)
	if err != nil || num == "" || strings.TrimSpace(num) != num {
		return 0, fmt.Errorf("%q is not a size (use an integer, optionally with KiB, MiB or GiB, or %q)", s, unlimited)
	}
	if v > math.MaxUint64/factor {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v * factor, nil
}

// parseCount reads a plain non-negative integer.
func parseCount(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number (or %q)", s, unlimited)
	}
	return v, nil
}

// parseDuration reads a Go duration such as 250ms or 2s.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use Go syntax such as 250ms or 2s, or %q)", s, unlimited)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be greater than zero", s)
	}
	return d, nil
}
