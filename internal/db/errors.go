package db

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// Why a database operation failed, as far as a caller should care: the
// API answers 507 for a full disk and 503 for a database it cannot reach,
// and the agent retries both (a turn that failed on them is answered
// again), where any other error is the request's or the code's own.

// IsDiskFull reports whether err says the disk under the database (or a
// file nekro writes) is full: SQLite's SQLITE_FULL ("database or disk is
// full"), ENOSPC or EDQUOT from the system, PostgreSQL's disk_full
// (SQLSTATE 53100).
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqliteFull {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "53100"
	}
	msg := err.Error()
	return strings.Contains(msg, "database or disk is full") || strings.Contains(msg, "no space left on device")
}

// IsUnavailable reports whether err says the database cannot be reached
// or cannot serve now, so the same request may succeed later: a refused,
// reset or broken connection, a server shutting down or starting up
// (SQLSTATE class 08, 57P01-57P03), too many connections (53300), a
// timeout, SQLite's I/O errors, a locked or read-only file.
func IsUnavailable(err error) bool {
	if err == nil || IsDiskFull(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" ||
			pe.Code == "53300" || pe.Code == "53000"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked, sqliteReadOnly, sqliteIOErr, sqliteCantOpen:
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &ce), errors.As(err, &oe), errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EROFS), pgconn.Timeout(err):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "failed to connect") || strings.Contains(msg, "unexpected EOF")
}

// IsTransient reports whether err is IsDiskFull or IsUnavailable: a
// failure of storage that may pass without anything else changing.
func IsTransient(err error) bool { return IsDiskFull(err) || IsUnavailable(err) }

// SQLite's primary result codes (sqlite3.h) that IsDiskFull and
// IsUnavailable look at; extended codes carry them in the low byte.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)
