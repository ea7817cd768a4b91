package bwrap

import (
	"testing"
	"time"
)

// A zygote imports only the heavy modules its chat's code named: by an
// import, or by a package that imports them, as a word.
func TestUsedPreloads(t *testing.T) {
	for _, c := range []struct {
		code string
		want uint64 // bit 0 numpy, bit 1 matplotlib.pyplot
	}{
		{"print(1)", 0},
		{"import numpy as np", 1},
		{"from numpy import array", 1},
		{"import pandas as pd", 1},
		{"import matplotlib.pyplot as plt", 3},
		{"import seaborn", 3},
		{"x = __import__('numpy')", 1},
		{"numpyish = 1; mynumpy = 2; matplotlib2 = 3", 0},
		{"import os\nimport matplotlib\n", 3},
	} {
		if got := usedPreloads(DefaultPreload, []byte(c.code)); got != c.want {
			t.Errorf("%q: uses %b, want %b", c.code, got, c.want)
		}
	}
}

// A chat earns a zygote after zygoteAfterRuns runs, or
// zygoteAfterHeavyRuns when its code named a heavy module, each within
// ZygoteIdle of the one before; it preloads what its code named.
func TestChatEarnsZygote(t *testing.T) {
	r := &Runner{Zygotes: 4, ZygoteIdle: time.Hour}
	runs := func(chat, code string, n int) {
		for i := 0; i < n; i++ {
			r.noteRun(chat, []byte(code))
		}
	}
	runs("/plain", "print(1)", zygoteAfterRuns-1)
	if earned, _ := r.chatWants("/plain"); earned {
		t.Errorf("a chat earned a zygote after %d runs", zygoteAfterRuns-1)
	}
	runs("/plain", "print(1)", 1)
	if earned, preload := r.chatWants("/plain"); !earned || len(preload) != 0 {
		t.Errorf("after %d plain runs: earned %v, preload %v", zygoteAfterRuns, earned, preload)
	}
	runs("/draws", "import matplotlib.pyplot as plt", zygoteAfterHeavyRuns-1)
	if earned, _ := r.chatWants("/draws"); earned {
		t.Errorf("a drawing chat earned a zygote after %d runs", zygoteAfterHeavyRuns-1)
	}
	runs("/draws", "print(2)", 1)
	if earned, preload := r.chatWants("/draws"); !earned || len(preload) != 2 {
		t.Errorf("drawing chat: earned %v, preload %v", earned, preload)
	}
	if earned, _ := r.chatWants("/never"); earned {
		t.Error("a chat that never ran earned a zygote")
	}
	// Runs further apart than ZygoteIdle start the count again.
	r.ZygoteIdle = time.Nanosecond
	time.Sleep(time.Millisecond)
	runs("/plain", "print(1)", 1)
	r.ZygoteIdle = time.Hour
	if earned, _ := r.chatWants("/plain"); earned {
		t.Error("runs an idle time apart still counted together")
	}
}

// At the bound, a new zygote replaces only one that is ready, has served
// and has been unused for zygoteEvictIdle; one still importing, or not
// used yet, or used lately, stays, and the new chat gets none.
func TestZygotesDoNotEvictEachOtherInUse(t *testing.T) {
	r := &Runner{Zygotes: 2}
	mk := func(chat string, ready bool, served int, used time.Duration) *zygote {
		z := &zygote{r: r, chat: chat, ready: ready, served: served, used: time.Now().Add(-used),
			stopped: make(chan struct{}), upCh: make(chan struct{})}
		return z
	}
	importing := mk("/importing", false, 0, time.Minute)
	unused := mk("/unused", true, 0, time.Minute)
	r.zygotes = map[string]*zygote{"/importing": importing, "/unused": unused}
	r.zmu.Lock()
	room := r.makeRoomLocked()
	r.zmu.Unlock()
	if room || len(r.zygotes) != 2 {
		t.Fatalf("made room by stopping a zygote importing or never used: %v, %d left", room, len(r.zygotes))
	}
	busy := mk("/busy", true, 3, time.Second)
	r.zygotes = map[string]*zygote{"/importing": importing, "/busy": busy}
	r.zmu.Lock()
	room = r.makeRoomLocked()
	r.zmu.Unlock()
	if room {
		t.Fatal("made room by stopping a zygote used a second ago")
	}
	old := mk("/old", true, 3, 2*zygoteEvictIdle)
	r.zygotes = map[string]*zygote{"/importing": importing, "/old": old}
	r.zmu.Lock()
	room = r.makeRoomLocked()
	r.zmu.Unlock()
	if !room || r.zygotes["/old"] != nil || r.zygotes["/importing"] == nil {
		t.Fatalf("room %v, zygotes left %v: want the long-unused one stopped", room, r.zygotes)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !old.isDead() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !old.isDead() {
		t.Error("the evicted zygote was not stopped")
	}
}
