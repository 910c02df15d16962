package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const globexDoc = `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: globex }
spec:
  tenant: globex
  identify: { nats: { users: [globex] } }
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// aged is a Decoded whose clock runs an hour ahead: every file looks long unchanged, so its
// stamp is trusted and a load reads only the files whose stamp changed.
func aged() *Decoded {
	return &Decoded{now: func() time.Time { return time.Now().Add(time.Hour) }}
}

func byTenant(set *Set) map[string]*Tenant {
	out := map[string]*Tenant{}
	for _, tn := range set.Tenants {
		out[tn.Policy.Tenant] = tn
	}
	return out
}

// A reload sees every way a file can change, though it reads only files whose stamp changed,
// and a tenant whose policy and defaults did not change is the very Tenant of the set before
// (what a publish relies on to compile only the others).
func TestReloadSeesEveryChangeAndKeepsUnchangedTenants(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, dir string)
		// inFlight is each tenant's inFlight after the change; kept are those whose Tenant
		// must be the one of the set before.
		inFlight map[string]uint64
		kept     []string
	}{
		{
			name:     "rewritten, same size",
			change:   func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "b.yaml"), acme("    inFlight: 7\n")) },
			inFlight: map[string]uint64{"acme": 7, "globex": 1000, "anonymous": 1000},
			kept:     []string{"globex", "anonymous"},
		},
		{
			name: "rewritten, same size, its mtime set back",
			change: func(t *testing.T, dir string) {
				path := filepath.Join(dir, "b.yaml")
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, acme("    inFlight: 7\n"))
				if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
			inFlight: map[string]uint64{"acme": 7, "globex": 1000, "anonymous": 1000},
			kept:     []string{"globex", "anonymous"},
		},
		{
			name: "replaced by rename",
			change: func(t *testing.T, dir string) {
				tmp := filepath.Join(dir, ".b.yaml.tmp")
				writeFile(t, tmp, acme("    inFlight: 7\n"))
				if err := os.Rename(tmp, filepath.Join(dir, "b.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			inFlight: map[string]uint64{"acme": 7, "globex": 1000, "anonymous": 1000},
			kept:     []string{"globex", "anonymous"},
		},
		{
			name: "removed",
			change: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			inFlight: map[string]uint64{"acme": 5, "anonymous": 1000},
			kept:     []string{"acme", "anonymous"},
		},
		{
			name: "added",
			change: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "d.yaml"), strings.ReplaceAll(globexDoc, "globex", "initech"))
			},
			inFlight: map[string]uint64{"acme": 5, "globex": 1000, "initech": 1000, "anonymous": 1000},
			kept:     []string{"acme", "globex", "anonymous"},
		},
		{
			name: "touched, contents the same",
			change: func(t *testing.T, dir string) {
				now := time.Now()
				if err := os.Chtimes(filepath.Join(dir, "b.yaml"), now, now); err != nil {
					t.Fatal(err)
				}
			},
			inFlight: map[string]uint64{"acme": 5, "globex": 1000, "anonymous": 1000},
			kept:     []string{"acme", "globex", "anonymous"},
		},
		{
			name: "the defaults changed: every tenant is resolved again",
			change: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "a.yaml"), strings.Replace(defaultsDoc, "  defaultTenant: anonymous\n",
					"  defaultTenant: anonymous\n  defaultLimits: { inFlight: 50 }\n", 1))
			},
			inFlight: map[string]uint64{"acme": 5, "globex": 50, "anonymous": 50},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.yaml"), defaultsDoc)
			writeFile(t, filepath.Join(dir, "b.yaml"), acme("    inFlight: 5\n"))
			writeFile(t, filepath.Join(dir, "c.yaml"), globexDoc)
			d := aged()
			before, err := d.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			c.change(t, dir)
			after, err := d.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]uint64{}
			for name, tn := range byTenant(after) {
				got[name] = *tn.Limits.InFlight
			}
			if len(got) != len(c.inFlight) {
				t.Errorf("tenants' inFlight %v, want %v", got, c.inFlight)
			}
			for name, want := range c.inFlight {
				if got[name] != want {
					t.Errorf("tenants' inFlight %v, want %v", got, c.inFlight)
					break
				}
			}
			old, now := byTenant(before), byTenant(after)
			for name := range now {
				if kept := strings.Contains(" "+strings.Join(c.kept, " ")+" ", " "+name+" "); (old[name] == now[name]) != kept {
					t.Errorf("tenant %s: the same Tenant as before %v, want %v", name, old[name] == now[name], kept)
				}
			}
			fresh, err := LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fresh.Hash != after.Hash {
				t.Errorf("hash %s after the change, %s loading the directory afresh", after.Hash, fresh.Hash)
			}
			if (after.Hash == before.Hash) != (c.name == "touched, contents the same") {
				t.Errorf("hash before %s, after %s", before.Hash, after.Hash)
			}
		})
	}
}

// A Kubernetes ConfigMap volume updates its files by swapping the ..data symlink they point
// through: their stamps (stat follows the links) are those of the new files.
func TestReloadSeesAConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, files map[string]string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, content := range files {
			writeFile(t, filepath.Join(dir, name, f), content)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 5\n")})
	for _, f := range []string{"a.yaml", "b.yaml"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	d := aged()
	if _, err := d.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	version("..v2", map[string]string{"a.yaml": defaultsDoc, "b.yaml": acme("    inFlight: 7\n")})
	set, err := d.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := *byTenant(set)["acme"].Limits.InFlight; got != 7 {
		t.Errorf("acme's inFlight %d after the swap, want 7", got)
	}
}

// A policy made invalid is refused naming its file, line and field; set right, it loads.
func TestReloadReportsAFileMadeInvalidThenLoadsItSetRight(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), defaultsDoc)
	writeFile(t, filepath.Join(dir, "b.yaml"), acme("    inFlight: 5\n"))
	d := aged()
	if _, err := d.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "b.yaml"), acme("    inFlight: x\n"))
	_, err := d.LoadDir(dir)
	want := filepath.Join(dir, "b.yaml") + `:11:15: spec.limits.inFlight: "x" is not a whole number (or "unlimited")`
	if got := strings.Join(errorLines(err), "\n"); got != want {
		t.Errorf("errors:\n%s\nwant:\n%s", got, want)
	}
	writeFile(t, filepath.Join(dir, "b.yaml"), acme("    inFlight: 6\n"))
	set, err := d.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := *byTenant(set)["acme"].Limits.InFlight; got != 6 {
		t.Errorf("acme's inFlight %d, want 6", got)
	}
}

// A file changed within racyWindow of its stat is given no stamp: a second write of the same
// size within the same tick of the file system's clock would leave its stamp as it was.
func TestAFileChangedJustNowIsReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	writeFile(t, path, defaultsDoc)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after   time.Duration
		trusted bool
	}{{0, false}, {racyWindow - time.Millisecond, false}, {racyWindow + time.Second, true}} {
		s, err := stampOf(path, fi.ModTime().Add(c.after))
		if err != nil {
			t.Fatal(err)
		}
		if trusted := s != (fileStamp{}); trusted != c.trusted {
			t.Errorf("stat %s after the write: stamp trusted %v, want %v", c.after, trusted, c.trusted)
		}
	}
}
