package fenced

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Client talks to a Store over HTTP.
type Client struct {
	// Base is the store's URL, "http://127.0.0.1:port".
	Base string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// Write asks the store to write value under key with fence. ok reports
// whether the store accepted it; err is set when no answer came, in which
// case the write may or may not have been applied.
func (c Client) Write(ctx context.Context, key string, fence int64, value string) (ok bool, err error) {
	q := url.Values{"key": {key}, "fence": {strconv.FormatInt(fence, 10)}, "value": {value}}
	r, err := c.do(ctx, http.MethodPost, "/write?"+q.Encode())
	return r.OK, err
}

// Read returns the register's fence and value.
func (c Client) Read(ctx context.Context, key string) (fence int64, value string, err error) {
	r, err := c.do(ctx, http.MethodGet, "/read?"+url.Values{"key": {key}}.Encode())
	return r.Fence, r.Value, err
}

func (c Client) do(ctx context.Context, method, path string) (Reply, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, nil)
	if err != nil {
		return Reply{}, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return Reply{}, fmt.Errorf("fenced store: %s %s: status %d", method, path, resp.StatusCode)
	}
	var r Reply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("fenced store: %s %s: %w", method, path, err)
	}
	return r, nil
}
