package vector

import (
	"math"
	"runtime"
	"slices"
	"sync"
)

// scopeIndex is one scope's vectors in memory, twice: exactly, as one
// float32 slab (vector i at vecs[i*dim:(i+1)*dim]), and quantised to int8
// with a scale per vector (codes, scale, l1), a quarter of the bytes.
// A search scans the codes for bounds on every score and computes exact
// scores only for the vectors those bounds cannot rule out, so it returns
// what an exact scan of the slab returns (see scanQuantised).
type scopeIndex struct {
	gen  int64
	dim  int
	ids  []string
	pos  map[string]int
	vecs []float32 // len(ids)*dim

	codes []int8    // len(ids)*dim: round(v[j]/scale), in -127..127
	scale []float32 // per vector: max |v[j]| / 127
	l1    []float32 // per vector: sum |codes[j]|
	resid []float32 // per vector: |v - scale*codes|_2, rounded up
}

// add appends a vector (normalised, of the index's dimension).
func (idx *scopeIndex) add(id string, v []float32) {
	idx.grow()
	copy(idx.vecs[len(idx.vecs)-idx.dim:], v)
	idx.pos[id] = len(idx.ids)
	idx.ids = append(idx.ids, id)
	idx.quantise(len(idx.ids) - 1)
}

// grow extends the slab, codes, scale and l1 by one vector's room (not
// ids and pos).
func (idx *scopeIndex) grow() {
	d := idx.dim
	idx.vecs = slices.Grow(idx.vecs, d)[:len(idx.vecs)+d]
	idx.codes = slices.Grow(idx.codes, d)[:len(idx.codes)+d]
	idx.scale = append(idx.scale, 0)
	idx.l1 = append(idx.l1, 0)
	idx.resid = append(idx.resid, 0)
}

// set replaces vector p.
func (idx *scopeIndex) set(p int, v []float32) {
	copy(idx.vecs[p*idx.dim:(p+1)*idx.dim], v)
	idx.quantise(p)
}

// quantise derives vector p's codes, scale, l1 and resid from its exact
// values.
func (idx *scopeIndex) quantise(p int) {
	d := idx.dim
	v := idx.vecs[p*d : (p+1)*d]
	c := idx.codes[p*d : (p+1)*d]
	var m float32
	for _, x := range v {
		if a := float32(math.Abs(float64(x))); a > m {
			m = a
		}
	}
	if m == 0 {
		clear(c)
		idx.scale[p], idx.l1[p], idx.resid[p] = 0, 0, 0
		return
	}
	s := m / 127
	inv := 1 / s
	var l1 int32
	var e2a, e2b float32
	j := 0
	for ; j+2 <= len(v); j += 2 {
		// Round to nearest without a branch on the sign (a random sign
		// mispredicts half the time): q+128.5 > 0, so truncating floors.
		r0 := int32(v[j]*inv+128.5) - 128
		r1 := int32(v[j+1]*inv+128.5) - 128
		r0, r1 = max(-127, min(127, r0)), max(-127, min(127, r1))
		c[j], c[j+1] = int8(r0), int8(r1)
		l1 += (r0 ^ (r0 >> 31)) - (r0 >> 31) + (r1 ^ (r1 >> 31)) - (r1 >> 31)
		e0, e1 := v[j]-s*float32(r0), v[j+1]-s*float32(r1)
		e2a += e0 * e0
		e2b += e1 * e1
	}
	for ; j < len(v); j++ {
		r := max(-127, min(127, int32(v[j]*inv+128.5)-128))
		c[j] = int8(r)
		l1 += (r ^ (r >> 31)) - (r >> 31)
		e := v[j] - s*float32(r)
		e2a += e * e
	}
	e2 := e2a + e2b
	idx.scale[p], idx.l1[p] = s, float32(l1)
	// Rounded up: float32 sums of d squares err by well under 1e-3.
	idx.resid[p] = float32(math.Sqrt(float64(e2))*(1+1e-3)) + 1e-7
}

// quantiseAll quantises every vector, in parallel parts when the index is
// large (a scope just loaded).
func (idx *scopeIndex) quantiseAll() {
	n, parts := len(idx.ids), idx.parts()
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := p * n / parts; i < (p+1)*n/parts; i++ {
				idx.quantise(i)
			}
		})
	}
	wg.Wait()
}

// remove swaps the last vector into id's place.
func (idx *scopeIndex) remove(id string) {
	p, ok := idx.pos[id]
	if !ok {
		return
	}
	d := idx.dim
	last := len(idx.ids) - 1
	if p != last {
		idx.ids[p] = idx.ids[last]
		idx.pos[idx.ids[p]] = p
		copy(idx.vecs[p*d:(p+1)*d], idx.vecs[last*d:])
		copy(idx.codes[p*d:(p+1)*d], idx.codes[last*d:])
		idx.scale[p], idx.l1[p], idx.resid[p] = idx.scale[last], idx.l1[last], idx.resid[last]
	}
	idx.ids = idx.ids[:last]
	idx.vecs = idx.vecs[:last*d]
	idx.codes = idx.codes[:last*d]
	idx.scale = idx.scale[:last]
	idx.l1 = idx.l1[:last]
	idx.resid = idx.resid[:last]
	delete(idx.pos, id)
}

// parallelFloats is the size of a scope (vectors times dimensions) from
// which a search splits the scan over the processors: below it, starting
// goroutines costs more than it saves.
const parallelFloats = 1 << 21

// quantisedFrom is the fewest vectors per wanted hit from which a search
// scans the int8 codes first: below it the exact scan is as cheap.
const quantisedFrom = 8

// parts returns how many goroutines scan the index.
func (idx *scopeIndex) parts() int {
	return max(1, min(runtime.GOMAXPROCS(0), len(idx.ids)*idx.dim/parallelFloats+1))
}

// scan pushes the index's candidates for qv into best: the best.k
// vectors most similar to qv, the same a scan of every exact score finds.
func (idx *scopeIndex) scan(scope string, qv []float32, best *topK[candidate]) {
	n := len(idx.ids)
	if n >= quantisedFrom*best.k {
		idx.scanQuantised(scope, qv, best)
		return
	}
	idx.scanExact(scope, qv, best)
}

// scanExact computes every exact score, in parallel parts when the index
// is large.
func (idx *scopeIndex) scanExact(scope string, qv []float32, best *topK[candidate]) {
	n := len(idx.ids)
	parts := idx.parts()
	if parts <= 1 {
		idx.scanRange(scope, qv, 0, n, best)
		return
	}
	partial := make([]*topK[candidate], parts)
	var wg sync.WaitGroup
	for p := range parts {
		partial[p] = &topK[candidate]{k: best.k, score: best.score}
		wg.Go(func() { idx.scanRange(scope, qv, p*n/parts, (p+1)*n/parts, partial[p]) })
	}
	wg.Wait()
	for _, h := range partial {
		for _, c := range h.items {
			best.push(c)
		}
	}
}

func (idx *scopeIndex) scanRange(scope string, qv []float32, lo, hi int, best *topK[candidate]) {
	d := idx.dim
	for i := lo; i < hi; i++ {
		sco := Dot(qv, idx.vecs[i*d:(i+1)*d])
		if m, full := best.full(); full && sco <= m {
			continue
		}
		best.push(candidate{scope: scope, id: idx.ids[i], score: sco})
	}
}

// quantQuery is a query quantised for the int8 scan.
type quantQuery struct {
	codes []int32 // round(q[j]/step)
	step  float64
	l1    float64 // sum |q[j]|
	l2    float64 // |q|_2
	slack float64 // what float32 rounding may add to an exact score
}

// quantiseQuery returns qv as integers as fine as the int32 sum of a
// dot product with int8 codes allows: |codes| <= qmax with
// dim*127*qmax < 2^31.
func quantiseQuery(qv []float32) quantQuery {
	qmax := min(32767, math.MaxInt32/(127*len(qv)))
	var m, l1, l2 float64
	for _, x := range qv {
		a := math.Abs(float64(x))
		m = max(m, a)
		l1 += a
		l2 += a * a
	}
	q := quantQuery{codes: make([]int32, len(qv)), l1: l1, l2: math.Sqrt(l2) * (1 + 1e-6),
		slack: 1e-5 + 1e-7*float64(len(qv))}
	if m == 0 {
		return q
	}
	q.step = m / float64(qmax)
	for j, x := range qv {
		q.codes[j] = int32(math.Round(float64(x) / q.step))
	}
	return q
}

// scanQuantised finds the exact top k by bounds. For vector i with scale
// s, codes c and residual e = v - s*c (|e[j]| <= s/2), and the query
// q = step*a + f (|f[j]| <= step/2),
//
//	approx = s*step*(a·c)
//	|q·v - approx| = |q·e + s*(f·c)| <= min(s/2*|q|_1, |q|_2*|e|_2) + s*step/2*|c|_1 = B
//
// so q·v lies in [approx-B, approx+B] (widened by the float32 rounding of
// Dot). With L the k-th largest lower bound, k vectors score at least L,
// and a vector whose upper bound is below L cannot be in the top k: only
// the others (typically a few dozen of 100,000) get an exact score; it
// returns how many did.
func (idx *scopeIndex) scanQuantised(scope string, qv []float32, best *topK[candidate]) int {
	n, d := len(idx.ids), idx.dim
	q := quantiseQuery(qv)
	upper := make([]float32, n)
	parts := idx.parts()
	lower := make([]*topK[float32], parts)
	self := func(x float32) float32 { return x }
	bounds := func(p, lo, hi int) {
		h := &topK[float32]{k: best.k, score: self}
		lower[p] = h
		for i := lo; i < hi; i++ {
			s := float64(idx.scale[i])
			approx := s * q.step * float64(dotInt8(q.codes, idx.codes[i*d:(i+1)*d]))
			b := min(s/2*q.l1, q.l2*float64(idx.resid[i])) + s*q.step/2*float64(idx.l1[i]) + q.slack
			upper[i] = float32(approx + b)
			lo := float32(approx - b)
			if m, full := h.full(); full && lo <= m {
				continue
			}
			h.push(lo)
		}
	}
	if parts <= 1 {
		bounds(0, 0, n)
	} else {
		var wg sync.WaitGroup
		for p := range parts {
			wg.Go(func() { bounds(p, p*n/parts, (p+1)*n/parts) })
		}
		wg.Wait()
	}
	all := &topK[float32]{k: best.k, score: self}
	for _, h := range lower {
		for _, x := range h.items {
			all.push(x)
		}
	}
	limit, full := all.full()
	if !full {
		idx.scanRange(scope, qv, 0, n, best) // fewer than k vectors
		return n
	}
	// float32 rounding of the bounds: compare a hair below the limit.
	limit -= float32(q.slack)
	if m, full := best.full(); full && m > limit {
		limit = m // best holds k at least as good (an earlier scope's)
	}
	exact := 0
	for i, u := range upper {
		if u < limit {
			continue
		}
		exact++
		sco := Dot(qv, idx.vecs[i*d:(i+1)*d])
		if m, full := best.full(); full && sco <= m {
			continue
		}
		best.push(candidate{scope: scope, id: idx.ids[i], score: sco})
	}
	return exact
}

// dotInt8 returns the dot product of a quantised query and a vector's
// codes, unrolled by eight into four accumulators. The caller keeps the
// sum within int32 (see quantiseQuery).
func dotInt8(a []int32, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0]*int32(bb[0]) + aa[4]*int32(bb[4])
		s1 += aa[1]*int32(bb[1]) + aa[5]*int32(bb[5])
		s2 += aa[2]*int32(bb[2]) + aa[6]*int32(bb[6])
		s3 += aa[3]*int32(bb[3]) + aa[7]*int32(bb[7])
	}
	for ; i < len(a); i++ {
		s0 += a[i] * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}
