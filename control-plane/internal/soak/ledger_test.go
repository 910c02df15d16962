package soak

import (
	"math/rand"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestAccountClassifiesEachMessage(t *testing.T) {
	fault := Window{Start: at(10), End: at(20), What: "nats-server killed", Kinds: []string{ErrDisconnected, ErrTimeout, ErrLost}}
	cases := []struct {
		name    string
		m       Message
		present int
		check   func(Row) int
	}{
		{"acked and present", Message{Sent: at(1), Done: at(1.1), Acked: true}, 1, func(r Row) int { return r.Delivered }},
		{"core publish received", Message{Sent: at(1)}, 1, func(r Row) int { return r.Delivered }},
		{"refused", Message{Sent: at(1), Done: at(1.1), Refused: true}, 0, func(r Row) int { return r.Refused }},
		{"refused but delivered", Message{Sent: at(1), Done: at(1.1), Refused: true}, 1, func(r Row) int { return r.RefusedDelivered }},
		{"disconnected during the fault", Message{Sent: at(9), Done: at(12), Failed: true, Err: ErrDisconnected}, 0, func(r Row) int { return r.FailedInFault }},
		{"timed out, sent before the fault", Message{Sent: at(6), Done: at(11), Failed: true, Err: ErrTimeout}, 0, func(r Row) int { return r.FailedInFault }},
		{"core publish lost in a fault", Message{Sent: at(9.5)}, 0, func(r Row) int { return r.FailedInFault }},
		{"core publish lost outside faults", Message{Sent: at(3)}, 0, func(r Row) int { return r.FailedNoFault }},
		{"error outside faults", Message{Sent: at(30), Done: at(31), Failed: true, Err: ErrDisconnected}, 0, func(r Row) int { return r.FailedNoFault }},
		{"an error kind the fault does not produce", Message{Sent: at(12), Done: at(13), Failed: true, Err: ErrOther}, 0, func(r Row) int { return r.FailedNoFault }},
		{"seen after the fault, sent during it", Message{Sent: at(19), Done: at(79), Failed: true, Err: ErrDisconnected}, 0, func(r Row) int { return r.FailedNoFault }},
		{"acknowledged and lost", Message{Sent: at(12), Done: at(13), Acked: true}, 0, func(r Row) int { return r.AckedMissing }},
		{"error yet delivered", Message{Sent: at(12), Done: at(13), Failed: true, Err: ErrTimeout}, 1, func(r Row) int { return r.DeliveredDespiteError }},
		{"delivered twice", Message{Sent: at(12), Done: at(13), Acked: true}, 2, func(r Row) int { return r.Duplicates }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Account(Flow{Messages: []Message{c.m}, Present: []int{c.present}, Faults: []Window{fault}, Unacknowledged: time.Second})
			if got := c.check(r); got != 1 {
				t.Errorf("%+v", r)
			}
		})
	}
}

// Whatever happens to them, the messages of a flow are each counted once, in one category.
func TestAccountConservesMessages(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		n := rng.Intn(300)
		f := Flow{Unacknowledged: 2 * time.Second}
		for i := 0; i < rng.Intn(4); i++ {
			s := rng.Float64() * 100
			f.Faults = append(f.Faults, Window{Start: at(s), End: at(s + rng.Float64()*10), Kinds: []string{ErrDisconnected, ErrLost}})
		}
		for i := 0; i < n; i++ {
			s := rng.Float64() * 100
			m := Message{Sent: at(s), Acked: rng.Intn(2) == 0, Refused: rng.Intn(5) == 0, Failed: rng.Intn(5) == 0,
				Err: []string{ErrDisconnected, ErrTimeout, ErrOther}[rng.Intn(3)]}
			if rng.Intn(4) > 0 {
				m.Done = at(s + rng.Float64())
			}
			f.Messages = append(f.Messages, m)
			f.Present = append(f.Present, rng.Intn(3))
		}
		r := Account(f)
		if sum := r.Delivered + r.Refused + r.FailedInFault + r.Unaccounted; sum != n {
			t.Fatalf("trial %d: %d messages, %d accounted: %+v", trial, n, sum, r)
		}
		if r.Unaccounted != r.AckedMissing+r.RefusedDelivered+r.FailedNoFault {
			t.Fatalf("trial %d: unaccounted %d is not the sum of its kinds: %+v", trial, r.Unaccounted, r)
		}
	}
}

func TestTotalSumsRows(t *testing.T) {
	a := Row{Sent: 10, Delivered: 7, Refused: 2, FailedInFault: 1, Duplicates: 3}
	b := Row{Sent: 5, Delivered: 4, Unaccounted: 1, AckedMissing: 1}
	got := Total([]Row{a, b})
	if got.Sent != 15 || got.Delivered != 11 || got.Refused != 2 || got.FailedInFault != 1 || got.Unaccounted != 1 || got.AckedMissing != 1 || got.Duplicates != 3 {
		t.Errorf("%+v", got)
	}
}

func TestAccountSpansTheUnaccountedSendTimes(t *testing.T) {
	msgs := []Message{
		{Sent: at(1), Done: at(1.1), Acked: true},
		{Sent: at(40), Done: at(100), Failed: true},
		{Sent: at(2), Done: at(62), Failed: true},
		{Sent: at(50), Done: at(51), Refused: true},
	}
	r := Account(Flow{Messages: msgs, Present: []int{1, 0, 0, 0}})
	if r.Unaccounted != 2 || !r.UnaccountedSent.Start.Equal(at(2)) || !r.UnaccountedSent.End.Equal(at(40)) {
		t.Fatalf("unaccounted %d sent %v to %v, want 2 sent at 2 s to 40 s", r.Unaccounted, r.UnaccountedSent.Start, r.UnaccountedSent.End)
	}
}
