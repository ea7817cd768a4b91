package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenPostgres connects a pool to the database at url (a postgres:// URL
// or a key=value DSN) and checks that it answers.
func OpenPostgres(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The URL may hold a password: never echo it.
		return nil, fmt.Errorf("open postgres: the database URL does not parse")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s:%d/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// migrationLockID is the advisory lock taken while migrating: any
// constant shared by every nekro process works.
const migrationLockID = 0x6e656b726f // "nekro"

const pgMigrationsTable = `CREATE TABLE IF NOT EXISTS nekro_migrations (
	component  text    NOT NULL,
	version    integer NOT NULL,
	name       text    NOT NULL,
	applied_at text    NOT NULL,
	PRIMARY KEY (component, version)
)`

// MigratePostgres brings component's tables up to date with ms.
func MigratePostgres(ctx context.Context, pool *pgxpool.Pool, component string, ms []Migration) error {
	if err := checkList(component, ms); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLockID)); err != nil {
			return fmt.Errorf("migrate %s: lock: %w", component, err)
		}
		if _, err := tx.Exec(ctx, pgMigrationsTable); err != nil {
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		rows, err := tx.Query(ctx, `SELECT version, name FROM nekro_migrations WHERE component = $1 ORDER BY version`, component)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		done, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (applied, error) {
			var a applied
			err := r.Scan(&a.version, &a.name)
			return a, err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		todo, err := pending(component, ms, done)
		if err != nil {
			return err
		}
		for _, m := range todo {
			// No arguments: pgx sends it with the simple protocol, which
			// accepts several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate %s to version %d (%s): %w", component, m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO nekro_migrations (component, version, name, applied_at) VALUES ($1, $2, $3, $4)`,
				component, m.Version, m.Name, nowText()); err != nil {
				return fmt.Errorf("migrate %s: record version %d: %w", component, m.Version, err)
			}
		}
		return nil
	})
}
