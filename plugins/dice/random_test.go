package dice

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Distribution sanity of the randomness behind dice_roll and
// probability_wheel, over many draws: bounds wide enough (about 5 to 6
// standard deviations) that a fair generator fails them with probability
// below one in a million, narrow enough to catch an off-by-one face or a
// skewed weight.

func TestD20IsUniform(t *testing.T) {
	const n = 200000
	var counts [22]int
	for range n {
		counts[d(20)]++
	}
	if counts[0] != 0 || counts[21] != 0 {
		t.Fatalf("faces outside 1..20: %v", counts)
	}
	// Pearson's chi-square with 19 degrees of freedom: P(X > 70) < 1e-7.
	want := float64(n) / 20
	chi := 0.0
	for f := 1; f <= 20; f++ {
		chi += math.Pow(float64(counts[f])-want, 2) / want
	}
	if chi > 70 {
		t.Errorf("d20 is not uniform: chi-square %.1f, counts %v", chi, counts[1:21])
	}
}

func TestLuckyBonus(t *testing.T) {
	const n = 100000
	for _, difficulty := range []int{1, 10, 18} {
		for range 1000 {
			if b := luckyBonus(difficulty); b != 0 {
				t.Fatalf("bonus %d at difficulty %d", b, difficulty)
			}
		}
	}
	for _, difficulty := range []int{19, 20} {
		var counts [4]int
		for range n {
			b := luckyBonus(difficulty)
			if b < 0 || b > 3 {
				t.Fatalf("bonus %d", b)
			}
			counts[b]++
		}
		// 11 in 20 get a bonus (sd 0.16%); 1, 2 and 3 equally often.
		rate := 1 - float64(counts[0])/n
		if math.Abs(rate-0.55) > 0.01 {
			t.Errorf("difficulty %d: bonus rate %.3f, want 0.55", difficulty, rate)
		}
		for b := 1; b <= 3; b++ {
			if share := float64(counts[b]) / float64(n-counts[0]); math.Abs(share-1.0/3) > 0.015 {
				t.Errorf("difficulty %d: bonus +%d in %.3f of bonuses, want 1/3", difficulty, b, share)
			}
		}
	}
}

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		n, bonus, difficulty int
		want                 string
	}{
		{1, 0, 2, "大失败！"},
		{1, 0, 1, "成功"},  // a natural 1 that meets the difficulty
		{1, 2, 19, "失败"}, // the bonus lifts it out of a critical failure
		{20, 0, 20, "大成功！"},
		{20, 3, 20, "大成功！"},
		{19, 1, 20, "成功"}, // a success, not a natural 20
		{9, 0, 10, "失败"},
		{10, 0, 10, "成功"},
	} {
		if got := judge(c.n, c.n+c.bonus, c.difficulty); got != c.want {
			t.Errorf("roll %d+%d against %d: %s, want %s", c.n, c.bonus, c.difficulty, got, c.want)
		}
	}
}

func TestWheelDistribution(t *testing.T) {
	outcomes, fallback, err := distribute(map[string]float64{"rare": 5, "gold": 30, "trap": 15, "never": 0}, "empty", 100)
	if err != nil {
		t.Fatal(err)
	}
	if fallback != (outcome{"empty", 50}) {
		t.Fatalf("fallback %+v", fallback)
	}
	want := map[string]float64{"empty": 0.50, "gold": 0.30, "trap": 0.15, "rare": 0.05}
	if len(outcomes) != len(want) {
		t.Fatalf("outcomes %+v: a weight-0 choice must be left out", outcomes)
	}
	const n = 200000
	counts := map[string]int{}
	for range n {
		counts[pick(outcomes, rand.Float64()).name]++
	}
	for name, p := range want {
		got := float64(counts[name]) / n
		sd := math.Sqrt(p * (1 - p) / n)
		if math.Abs(got-p) > 6*sd {
			t.Errorf("%s drawn %.4f of the time, want %.2f", name, got, p)
		}
	}
	// The edges of [0, 1) land on outcomes with weight.
	if pick(outcomes, 0).name != outcomes[0].name || pick(outcomes, math.Nextafter(1, 0)).name != "rare" {
		t.Errorf("edges: %v %v", pick(outcomes, 0), pick(outcomes, math.Nextafter(1, 0)))
	}

	// The fallback named among the choices gets the rest added.
	outcomes, fallback, _ = distribute(map[string]float64{"a": 20, "b": 30}, "a", 100)
	if fallback != (outcome{"a", 70}) || len(outcomes) != 2 {
		t.Errorf("fallback among the choices: %+v %+v", fallback, outcomes)
	}
	// Rounding: thirds that add up to a hair over the total still fit.
	if _, _, err := distribute(map[string]float64{"a": 33.4, "b": 33.3, "c": 33.3}, "", 100); err != nil {
		t.Errorf("thirds: %v", err)
	}
}
