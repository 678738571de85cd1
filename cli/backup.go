package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/leashd/leash/internal/backuptar"
)

// leash backup DIR (spec §15.11): the disk store's copy, taken while the service serves,
// unpacked into DIR, a new directory; pointing store.disk.path at DIR restores it.

func addBackupVerb() {
	verbs["backup"] = verb{"DIR", 1, 1, noFlags, runBackup, "backup DIR",
		"copy the disk store, while it serves, into the new directory DIR; serve from a copy by setting store.disk.path to it (POST /v1/admin/backup)"}
	order = append(order, "backup")
}

func runBackup(ctx context.Context, c *command, a []string, f *flags) int {
	dir := a[0]
	if _, err := os.Lstat(dir); err == nil {
		return c.usage("%s already exists: name a new directory", dir)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := backuptar.Extract(pr, dir)
		pr.CloseWithError(err) // a failed unpack ends the download too
		done <- err
	}()
	err := c.c.Backup(ctx, pw)
	pw.CloseWithError(err)
	if xerr := <-done; err == nil {
		err = xerr
	}
	if err != nil {
		_ = os.RemoveAll(dir) // a partial copy is no backup
		return c.fail(err)
	}
	c.print(map[string]string{"backup": dir}, fmt.Sprintf("backup written to %s\nserve from it with store.disk.path: %s (LEASH_STORE_DISK_PATH)\n", dir, dir))
	return ExitOK
}
