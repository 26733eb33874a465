package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver, registers "sqlite"
)

var (
	errNotFound = errors.New("order not found")
	// errStale reports a write refused by the fence: a newer lock holder
	// has taken over the order since this one's lock was granted.
	errStale = errors.New("stale lock holder: a newer holder has taken over the order")
)

// Order statuses.
const (
	statusPending = "pending"
	statusPaid    = "paid"
)

// Order is one order row. Owner is the caller that created it, the only
// one that may read or pay it; it is not part of the answer.
type Order struct {
	ID          int64      `json:"id"`
	Owner       string     `json:"-"`
	Customer    string     `json:"customer"`
	AmountCents int64      `json:"amount_cents"`
	Currency    string     `json:"currency"`
	Status      string     `json:"status"`
	LastFence   int64      `json:"last_fence"`
	CreatedAt   time.Time  `json:"created_at"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
}

// Charge is one row of the fake payment provider's ledger.
type Charge struct {
	ID          int64     `json:"id"`
	OrderID     int64     `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	Currency    string    `json:"currency"`
	Fence       int64     `json:"fence"`
	CreatedAt   time.Time `json:"created_at"`
}

// store keeps orders and charges in SQLite.
//
// Fencing (Kleppmann's scenario): a pay request holds the order's lock and
// its fence F, which is greater than every earlier holder's. It first
// claims the order, UPDATE ... SET last_fence = F WHERE last_fence < F, and
// its final write only succeeds while last_fence <= F. A holder whose lock
// ran out while it was paused (GC, a slow provider), and whose order was
// claimed meanwhile by a newer holder, therefore has its payment refused by
// the database, however late it wakes up. The fake provider's ledger
// (charges) is written in the same transaction as the order, so a refused
// payment leaves no charge; a real provider would get the order id as its
// idempotency key instead.
type store struct {
	db *sql.DB
}

const schema = `
CREATE TABLE IF NOT EXISTS orders (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	owner        TEXT    NOT NULL DEFAULT '',
	customer     TEXT    NOT NULL,
	amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
	currency     TEXT    NOT NULL,
	status       TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid')),
	last_fence   INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	paid_at      INTEGER
);
CREATE TABLE IF NOT EXISTS charges (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	order_id     INTEGER NOT NULL REFERENCES orders(id),
	amount_cents INTEGER NOT NULL,
	currency     TEXT    NOT NULL,
	fence        INTEGER NOT NULL,
	created_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS charges_order ON charges(order_id);
`

// openStore opens (creating if needed) the SQLite database at path.
func openStore(ctx context.Context, path string) (*store, error) {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// SQLite has one writer at a time; one connection keeps transactions
	// from failing with SQLITE_BUSY instead of queueing.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("creating schema in %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating schema in %s: %w", path, err)
	}
	return &store{db: db}, nil
}

// migrate brings a database made by an earlier version of the app up to
// the schema. Orders made before they had an owner get the owner "",
// which no caller is (callerPattern needs a character): nobody can read
// or pay them through the API.
func migrate(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('orders') WHERE name = 'owner'`).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = db.ExecContext(ctx, `ALTER TABLE orders ADD COLUMN owner TEXT NOT NULL DEFAULT ''`)
	return err
}

func (s *store) close() error { return s.db.Close() }

// createOrder stores a new order of owner, the authenticated caller.
func (s *store) createOrder(ctx context.Context, owner, customer string, cents int64, currency string) (Order, error) {
	now := time.Now().UTC()
	res, err := s.db.ExecContext(ctx,
		`INSERT INTO orders (owner, customer, amount_cents, currency, created_at) VALUES (?, ?, ?, ?, ?)`,
		owner, customer, cents, currency, now.UnixMicro())
	if err != nil {
		return Order{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Order{}, err
	}
	return s.order(ctx, owner, id)
}

// querier is what order needs from *sql.DB and *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// order returns owner's order id. Another caller's order is errNotFound,
// as a missing one is: a caller learns nothing of orders not its own.
func (s *store) order(ctx context.Context, owner string, id int64) (Order, error) {
	return getOrder(ctx, s.db, owner, id)
}

func getOrder(ctx context.Context, q querier, owner string, id int64) (Order, error) {
	var o Order
	var created int64
	var paid sql.NullInt64
	err := q.QueryRowContext(ctx,
		`SELECT id, owner, customer, amount_cents, currency, status, last_fence, created_at, paid_at FROM orders WHERE id = ? AND owner = ?`, id, owner).
		Scan(&o.ID, &o.Owner, &o.Customer, &o.AmountCents, &o.Currency, &o.Status, &o.LastFence, &created, &paid)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, errNotFound
	}
	if err != nil {
		return Order{}, err
	}
	o.CreatedAt = time.UnixMicro(created).UTC()
	if paid.Valid {
		t := time.UnixMicro(paid.Int64).UTC()
		o.PaidAt = &t
	}
	return o, nil
}

// claim records fence as owner's order's newest lock holder and returns
// the order. It fails with errStale when a holder with a greater fence has
// claimed it already, and with errNotFound when the order is not owner's.
// A fence of 0 (Redlock: no fences) claims nothing.
func (s *store) claim(ctx context.Context, owner string, id, fence int64) (Order, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Order{}, err
	}
	defer tx.Rollback()
	if fence > 0 {
		res, err := tx.ExecContext(ctx, `UPDATE orders SET last_fence = ? WHERE id = ? AND owner = ? AND last_fence < ?`, fence, id, owner, fence)
		if err != nil {
			return Order{}, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return Order{}, err
		} else if n == 0 {
			if _, err := getOrder(ctx, tx, owner, id); err != nil {
				return Order{}, err // errNotFound
			}
			return Order{}, errStale
		}
	}
	o, err := getOrder(ctx, tx, owner, id)
	if err != nil {
		return Order{}, err
	}
	return o, tx.Commit()
}

// pay charges owner's order and marks it paid, in one transaction, if it
// is still pending and no holder newer than fence has claimed it (0: no
// fence check). Otherwise it changes nothing and returns errStale.
func (s *store) pay(ctx context.Context, owner string, id, fence int64) (Order, Charge, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Order{}, Charge{}, err
	}
	defer tx.Rollback()
	now := time.Now().UTC()
	res, err := tx.ExecContext(ctx,
		`UPDATE orders SET status = 'paid', paid_at = ?
		 WHERE id = ? AND owner = ? AND status = 'pending' AND (? = 0 OR last_fence <= ?)`,
		now.UnixMicro(), id, owner, fence, fence)
	if err != nil {
		return Order{}, Charge{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return Order{}, Charge{}, err
	} else if n == 0 {
		return Order{}, Charge{}, errStale
	}
	o, err := getOrder(ctx, tx, owner, id)
	if err != nil {
		return Order{}, Charge{}, err
	}
	c := Charge{OrderID: id, AmountCents: o.AmountCents, Currency: o.Currency, Fence: fence, CreatedAt: now}
	res, err = tx.ExecContext(ctx,
		`INSERT INTO charges (order_id, amount_cents, currency, fence, created_at) VALUES (?, ?, ?, ?, ?)`,
		c.OrderID, c.AmountCents, c.Currency, c.Fence, now.UnixMicro())
	if err != nil {
		return Order{}, Charge{}, err
	}
	if c.ID, err = res.LastInsertId(); err != nil {
		return Order{}, Charge{}, err
	}
	return o, c, tx.Commit()
}

// charges returns the order's charges, oldest first.
func (s *store) charges(ctx context.Context, orderID int64) ([]Charge, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, order_id, amount_cents, currency, fence, created_at FROM charges WHERE order_id = ? ORDER BY id`, orderID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Charge{}
	for rows.Next() {
		var c Charge
		var created int64
		if err := rows.Scan(&c.ID, &c.OrderID, &c.AmountCents, &c.Currency, &c.Fence, &created); err != nil {
			return nil, err
		}
		c.CreatedAt = time.UnixMicro(created).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}
