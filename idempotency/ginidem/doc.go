// Package ginidem is the Gin face of padlock/idempotency: New makes a Gin
// route idempotent under the Idempotency-Key header, with the options,
// answers and Redis layout package idempotency documents.
//
//	r.POST("/orders", auth, ginidem.New(locker, rdb, userID,
//		idempotency.WithWaitForInFlight(5*time.Second)), createOrder)
//
// Only users of this package compile gin; the net/http middleware,
// idempotency.New, does not.
package ginidem
