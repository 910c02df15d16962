// Package gctune makes the garbage collector run less often in the harness. Each operation
// allocates a little (a goroutine, a payload, the client's buffers); at tens of thousands per
// second the default collector runs several times a second, and on a 2-core machine its
// dedicated worker takes one of the two Ps the dispatcher and the clients need — showing up as
// harness lateness. The live heap is small (the schedule: 12 bytes per operation), so a
// higher target costs little memory.
package gctune

import (
	"os"
	"runtime/debug"
)

// Apply sets GOGC to 400 unless the environment sets GOGC.
func Apply() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
