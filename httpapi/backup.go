package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/internal/backuptar"
)

// codeBackupNotSupported answers POST /v1/admin/backup on a store that is not the disk
// store (spec §15.11).
const codeBackupNotSupported engine.Code = "backup_not_supported"

// backup is POST /v1/admin/backup (spec §15.11): the store writes a checkpoint into a
// temporary directory, which is answered as a tar stream and removed.
func backup(x *exchange) {
	if x.a.backup == nil {
		x.writeError(http.StatusConflict, codeBackupNotSupported,
			"only the disk store (store.backend: disk) is backed up through this route; back up Redis with its own persistence")
		return
	}
	tmp, err := os.MkdirTemp("", "leash-backup-")
	if err != nil {
		x.engineError(err)
		return
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "data")
	if err := x.a.backup(x.r.Context(), dir); err != nil {
		x.engineError(err)
		return
	}
	// A large store takes longer than http.write_timeout to send: this answer has none.
	_ = http.NewResponseController(x.rw).SetWriteDeadline(time.Time{})
	h := x.rw.Header()
	if _, ok := h[RequestIDHeader]; !ok {
		h[RequestIDHeader] = []string{x.requestID()}
	}
	h["Content-Type"] = []string{"application/x-tar"}
	h["Cache-Control"] = x.a.hdrNoStore
	x.rw.WriteHeader(http.StatusOK)
	if err := backuptar.Write(x.rw, dir); err != nil {
		// The status is sent: the client sees a truncated stream, which it refuses.
		x.a.log.Error("backup stream failed", "err", err)
		panic(http.ErrAbortHandler)
	}
}
