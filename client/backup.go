package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Backup asks the service for a consistent copy of its disk store, taken while it serves,
// and writes the tar stream it answers into w (POST /v1/admin/backup, an operator's key).
// Only ctx bounds the call, not Options.Timeout: a large store takes a while. A store that
// is not the disk store is an *Error with code backup_not_supported (409).
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	const op = "POST /v1/admin/backup"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/admin/backup", nil)
	if err != nil {
		return fmt.Errorf("leash client: %s: %w", op, err)
	}
	req.Header.Set("Accept", "application/x-tar")
	req.Header.Set("User-Agent", c.ua)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &transportError{op: op, err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return &transportError{op: op, err: err}
		}
		return newError(op, resp, b)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return &transportError{op: op, err: err}
	}
	return nil
}
