package filesystem

import (
	"golang.org/x/sys/unix"
)

// networkMagic names the statfs magic numbers of filesystems whose changes
// can happen on another machine, where inotify sees nothing; watching them
// silently misses events, so it needs the caller's explicit consent.
var networkMagic = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse", // sshfs, s3fs, gcsfuse and friends
	0x00c36400: "ceph",
	0x5346414f: "afs",
	0x73757245: "coda",
	0x564c:     "ncp",
	0x013111a8: "ibrix",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
}

// networkFilesystem reports whether path lives on a network filesystem,
// and which.
func networkFilesystem(path string) (string, bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", false, err
	}
	name, ok := networkMagic[int64(st.Type)]
	return name, ok, nil
}
