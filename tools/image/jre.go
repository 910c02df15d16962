package main

import (
	"path"
	"path/filepath"
)

// jreLayer is Debian's OpenJDK 17 runtime, at the path it has on this machine (its java finds
// its home from its own path): bin/java and bin/keytool, lib/ and conf/, and every library
// ldd lists for them, the loader with them. It is the bottom layer of both the kafka and the
// clients image, built once, so that the two share it (one digest; containerd stores it once).
//
// Debian makes much of conf/ and lib/ symbolic links into /etc/java-17-openjdk (java.security,
// jvm.cfg, the policies) and /etc/ssl/certs/java (cacerts); the layer carries the files they
// name at the links' paths, so the images hold no links.
func jreLayer(javaHome string, meta nodeMeta) (*tree, part, error) {
	home, err := filepath.EvalSymlinks(javaHome)
	if err != nil {
		return nil, part{}, err
	}
	t := newTree()
	for _, b := range []string{"java", "keytool"} {
		if err := t.host(path.Join(home, "bin", b), filepath.Join(home, "bin", b)); err != nil {
			return nil, part{}, err
		}
	}
	if err := t.host(path.Join(home, "release"), filepath.Join(home, "release")); err != nil {
		return nil, part{}, err
	}
	if err := t.hostDir(path.Join(home, "conf"), filepath.Join(home, "conf"), nil); err != nil {
		return nil, part{}, err
	}
	if err := t.hostDir(path.Join(home, "lib"), filepath.Join(home, "lib"), notHeadless); err != nil {
		return nil, part{}, err
	}
	// libjava.so and its kin need libjvm.so, which the launcher loads from lib/server by path;
	// ldd finds it there only when told.
	if err := t.withLibraries("LD_LIBRARY_PATH=" + filepath.Join(home, "lib", "server")); err != nil {
		return nil, part{}, err
	}
	l, err := compressedLayer(t.list(), meta.created)
	if err != nil {
		return nil, part{}, err
	}
	return t, part{layer: l, comment: "OpenJDK 17 runtime (Debian's, headless) and its libraries"}, nil
}

// notHeadless is what of the JDK's lib/ a headless runtime leaves out: the libraries Debian
// ships in openjdk-17-jre, not -jre-headless (AWT on X11, the splash screen, the ATK bridge,
// which pull in X11 and GTK's libraries), the JDK's sources (a link to a package not
// installed) and javac's ct.sym.
func notHeadless(rel string) bool {
	switch rel {
	case "libawt_xawt.so", "libjawt.so", "libsplashscreen.so", "libatk-wrapper.so", "src.zip", "ct.sym":
		return true
	}
	return false
}
