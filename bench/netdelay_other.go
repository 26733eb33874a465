//go:build !linux

package main

import (
	"errors"
	"time"
)

var errNoEventLoop = errors.New("no event loop on this platform")

// startEventLoop is Linux's; elsewhere the proxy uses the delay line.
func startEventLoop(time.Duration, string) (string, error) { return "", errNoEventLoop }
