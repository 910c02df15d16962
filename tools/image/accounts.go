package main

import "fmt"

// account is the one user besides root a node image runs as. home, if set, is made and owned by
// the user (the nats CLI keeps its contexts there); else the user's home is /nonexistent, as
// Debian writes system users.
type account struct {
	name string
	uid  int
	home string
}

// base adds what every node image with a C library has: /etc/passwd and /etc/group naming root
// and the account (the chart's runAsNonRoot needs a numeric USER; a name for it keeps `id`, the
// JVM's user.name and logs readable), /etc/nsswitch.conf (glibc's resolver reads /etc/hosts
// before DNS, as on Debian; a pod's own name is in /etc/hosts), and /tmp for anyone (1777: the
// JVM's perf data, the native libraries Kafka's compression jars unpack there).
func (t *tree) base(a account) {
	home := a.home
	if home == "" {
		home = "/nonexistent"
	}
	t.file("etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n",
		a.name, a.uid, a.uid, a.name, home)))
	t.file("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", a.name, a.uid)))
	t.file("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	t.dir("tmp", 0o1777, 0, "")
	if a.home != "" {
		t.dir(a.home, 0o755, a.uid, a.name)
	}
}

// user is the account as an image config's User: numeric, so that the kubelet can check
// runAsNonRoot without reading /etc/passwd.
func (a account) user() string {
	return fmt.Sprintf("%d:%d", a.uid, a.uid)
}
