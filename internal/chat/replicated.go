package chat

// Attachments across replicas. On PostgreSQL, where several nekro
// processes may serve one set of chats, every attachment is also stored
// in the database (chat_files, in 1 MiB chunks, so nothing is held whole
// in memory), and its name is reserved there before the file is created,
// so two replicas never give one name to two files. A replica that runs
// a chat's code, or serves one of its files, first copies into its own
// uploads directory what other replicas stored (SyncUploads). On SQLite,
// one host, the uploads directory is the only copy, as before.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// fileChunk is the size of one row of an attachment's content.
const fileChunk = 1 << 20

// replicated reports whether attachments are kept in the database too.
func (s *Service) replicated() bool { return s.dbNow == postgresNow }

// reserveName claims name among chatKey's files in the database; false
// when another file (here or on another replica) has it.
func (s *Service) reserveName(ctx context.Context, chatKey, name string) (bool, error) {
	if !s.replicated() {
		return true, nil
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO chat_files (chat_key, name, size, created_at)
		VALUES ($1, $2, -1, $3) ON CONFLICT DO NOTHING`, chatKey, name, micros(time.Now()))
	if err != nil {
		return false, fmt.Errorf("reserve attachment name %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// dropFile removes an attachment's rows (its reservation, or its copy).
func (s *Service) dropFile(ctx context.Context, chatKey, name string) error {
	if !s.replicated() {
		return nil
	}
	_, err := s.w.ExecContext(ctx, `DELETE FROM chat_files WHERE chat_key = $1 AND name = $2`, chatKey, name)
	if err == nil {
		_, err = s.w.ExecContext(ctx, `DELETE FROM chat_file_chunks WHERE chat_key = $1 AND name = $2`, chatKey, name)
	}
	if err != nil {
		return fmt.Errorf("remove attachment %s from the database: %w", name, err)
	}
	return nil
}

// storeCopy copies the attachment name, written in root, into the
// database, chunk by chunk, and marks it complete.
func (s *Service) storeCopy(ctx context.Context, root *os.Root, chatKey, name string) error {
	if !s.replicated() {
		return nil
	}
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, fileChunk)
	var size int64
	for seq := 0; ; seq++ {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 {
			if _, err := s.w.ExecContext(ctx, `INSERT INTO chat_file_chunks (chat_key, name, seq, data)
				VALUES ($1, $2, $3, $4)`, chatKey, name, seq, buf[:n]); err != nil {
				return fmt.Errorf("store attachment %s in the database: %w", name, err)
			}
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE chat_files SET size = $3 WHERE chat_key = $1 AND name = $2`,
		chatKey, name, size); err != nil {
		return fmt.Errorf("store attachment %s in the database: %w", name, err)
	}
	return nil
}

// SyncUploads copies into this replica's uploads directory of chatKey
// the attachments other replicas stored (PostgreSQL only; on SQLite it
// does nothing). Call it before a run of the chat's code, or before
// serving one of its files. It returns how many files it copied.
func (s *Service) SyncUploads(ctx context.Context, chatKey string) (int, error) {
	if !s.replicated() {
		return 0, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM chat_files WHERE chat_key = $1 AND size >= 0 ORDER BY name`, chatKey)
	if err != nil {
		return 0, fmt.Errorf("attachments of %s: %w", chatKey, err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, fmt.Errorf("attachments of %s: %w", chatKey, err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(names) == 0 {
		return 0, err
	}
	dir, err := s.layout.EnsureUploadsDir(chatKey)
	if err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("uploads dir: %w", err)
	}
	defer root.Close()
	copied := 0
	for _, name := range names {
		if _, err := root.Lstat(name); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return copied, fmt.Errorf("attachment %s: %w", name, err)
		}
		if err := s.fetchCopy(ctx, root, chatKey, name); err != nil {
			return copied, err
		}
		copied++
	}
	return copied, nil
}

// fetchCopy writes the database's copy of name into root, under a
// temporary name renamed into place once whole.
func (s *Service) fetchCopy(ctx context.Context, root *os.Root, chatKey, name string) (err error) {
	tmp := ".sync-" + name
	if len(tmp) > 255 {
		tmp = tmp[:255]
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("attachment %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	rows, err := s.r.QueryContext(ctx, `SELECT data FROM chat_file_chunks WHERE chat_key = $1 AND name = $2 ORDER BY seq`,
		chatKey, name)
	if err != nil {
		return fmt.Errorf("attachment %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return fmt.Errorf("attachment %s: %w", name, err)
		}
		if _, err := f.Write(data); err != nil {
			return fmt.Errorf("attachment %s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("attachment %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("attachment %s: %w", name, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		return fmt.Errorf("attachment %s: %w", name, err)
	}
	return nil
}
