package policy

import (
	"os"
	"time"
)

// fileStamp is what stat says of a policy file: while it stays the same, so do the file's
// contents, and a reload need not read them again. The zero stamp matches none.
//
// Why that holds: every write to a file sets its mtime and ctime to the current time; ctime no
// one can set back (touch -d, cp -p and rsync -t set mtime alone, and in doing so set ctime);
// a file replaced by rename, as editors, Kubernetes' ConfigMap volumes (through the ..data
// symlink, which stat follows) and atomic writers do, is another inode. What a stamp cannot
// tell apart is two writes of the same size within one tick of the file system's clock (a
// jiffy on Linux, 2 s on FAT). So a file changed within racyWindow of the moment it is
// stat-ed gets no stamp: it is read again at the next load, until it is older.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// racyWindow is longer than any file system's timestamp tick.
const racyWindow = 3 * time.Second

// stampOf stats path; the zero stamp when the file changed within racyWindow of now (taken
// before the stat) or the system tells no inode and ctime.
func stampOf(path string, now time.Time) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	s, ok := statStamp(fi)
	if !ok || now.Sub(time.Unix(0, max(s.mtime, s.ctime))) < racyWindow {
		return fileStamp{}, nil
	}
	return s, nil
}

// unchanged says the file stamped s is as it was when stamped was taken.
func (s fileStamp) unchanged(stamped fileStamp) bool {
	return s != fileStamp{} && s == stamped
}
