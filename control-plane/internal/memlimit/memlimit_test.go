package memlimit

import (
	"testing"
	"testing/fstest"
)

func TestContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  int64
		err   bool
	}{
		{"cgroup v2 with a limit", fstest.MapFS{"memory.max": {Data: []byte("268435456\n")}}, 256 << 20, false},
		{"cgroup v2 without one", fstest.MapFS{"memory.max": {Data: []byte("max\n")}}, 0, false},
		{"cgroup v1 with a limit", fstest.MapFS{"memory/memory.limit_in_bytes": {Data: []byte("134217728\n")}}, 128 << 20, false},
		{"cgroup v1 without one", fstest.MapFS{"memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}}, 0, false},
		{"no cgroup files", fstest.MapFS{}, 0, false},
		{"unreadable", fstest.MapFS{"memory.max": {Data: []byte("lots\n")}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := containerLimit(tc.files)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("containerLimit = %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
