package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// byteSize is a flag value of bytes written with an optional unit:
// 1073741824, 1GiB, 64MiB, 512KiB, or the decimal 1GB, 64MB, 512KB (K, M
// and G alone are read as binary units, as most tools do).
type byteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// noLimit is the byteSize of "none": no limit, where a flag allows it.
const noLimit = -1

// parseByteSize reads s as a byteSize; "none" (or "unlimited") is
// noLimit.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "none") || strings.EqualFold(t, "unlimited") {
		return noLimit, nil
	}
	mult := int64(1)
	for _, u := range byteUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 1GiB, 64MiB, 1048576)", s)
	}
	v := n * float64(mult)
	if v > 1<<62 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

func (b *byteSize) Set(s string) error {
	v, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

func (b *byteSize) String() string {
	v := int64(*b)
	if v < 0 {
		return "none"
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.m && v%u.m == 0 {
			return strconv.FormatInt(v/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Type() string { return "size" }

// envByteSize reads a size from the environment variable name, or def
// when it is unset; checkEnvSizes reports a malformed value.
func envByteSize(name string, def int64) *byteSize {
	b := byteSize(def)
	if v, ok := os.LookupEnv(name); ok {
		if n, err := parseByteSize(v); err == nil {
			b = byteSize(n)
		}
	}
	return &b
}

// checkEnvSizes fails on an environment variable of names holding
// something that is not a size, rather than ignoring it.
func checkEnvSizes(names ...string) error {
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			if _, err := parseByteSize(v); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}
