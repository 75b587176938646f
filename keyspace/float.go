package keyspace

import (
	"math/big"
	"strings"
)

// INCRBYFLOAT and HINCRBYFLOAT compute in C's long double (x87 extended precision: a
// 64-bit mantissa) and store the sum as "%.17Lf" without trailing zeros, so that 0.1 plus
// 0.2 is stored as "0.3". big.Float with 64 bits of precision and round-to-nearest-even
// computes the same sums; its 'f' formatting, like glibc's printf, is exact.

// longDoublePrec is the mantissa of x87's long double.
const longDoublePrec = 64

// maxFloatLen is the longest float Redis reads (MAX_LONG_DOUBLE_CHARS).
const maxFloatLen = 5 * 1024

// ParseLongDouble reads b as Redis's string2ld reads a long double: a decimal number
// (sign, digits, point, exponent), or inf/infinity with an optional sign; no spaces, no
// NaN. It reports whether b is one.
func ParseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= maxFloatLen {
		return nil, false
	}
	s := string(b)
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return nil, false
	}
	if l := strings.ToLower(body); l == "inf" || l == "infinity" {
		return new(big.Float).SetInf(s[0] == '-'), true
	}
	if !decimalFloat(body) {
		return nil, false
	}
	f, _, err := new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven).Parse(s, 10)
	if err != nil {
		return nil, false
	}
	return f, true
}

// decimalFloat reports whether s (without its sign) is digits with an optional point and
// at least one digit, then an optional exponent.
func decimalFloat(s string) bool {
	digits, i := 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		n, exp := 0, 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			n++
			exp = min(exp*10+int(s[i]-'0'), 1<<20)
		}
		if n == 0 || exp > 6000 { // past long double's range (strtold's ERANGE), or no digits
			return false
		}
	}
	return i == len(s)
}

// addFloats returns cur + delta as INCRBYFLOAT stores it: ErrNotFloat when delta is not
// a float, errCur when cur is not, ErrNaNOrInf when the sum is not finite.
func addFloats(cur, delta []byte, errCur error) ([]byte, error) {
	d, ok := ParseLongDouble(delta)
	if !ok {
		return nil, ErrNotFloat
	}
	c, ok := ParseLongDouble(cur)
	if !ok {
		return nil, errCur
	}
	if c.IsInf() || d.IsInf() {
		return nil, ErrNaNOrInf
	}
	sum := new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven).Add(c, d)
	if exp := sum.MantExp(nil); exp > 16384 { // past long double's range: C gives inf
		return nil, ErrNaNOrInf
	}
	return []byte(FormatLongDouble(sum)), nil
}

// FormatLongDouble writes f as Redis's ld2string in human mode: "%.17Lf", then trailing
// zeros (and a trailing point) removed, and "-0" written "0".
func FormatLongDouble(f *big.Float) string {
	s := f.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// IncrByFloat adds delta to key i's float value (a new key counts from 0, with no expiry;
// an existing key keeps its expiry) and returns the new value as stored: ErrNotFloat when
// either is not a float, ErrNaNOrInf when the sum is not finite, ErrWrongType when the
// key holds another type.
func (tx *Tx) IncrByFloat(i int, delta []byte) ([]byte, error) {
	cur := []byte("0")
	switch v, ok := tx.Get(i); {
	case ok:
		cur = v
	case tx.Kind(i) != KindNone:
		return nil, ErrWrongType
	}
	s, err := addFloats(cur, delta, ErrNotFloat)
	if err != nil {
		return nil, err
	}
	return s, tx.SetKeepTTL(i, s)
}
