package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/backup"
)

func init() { subcommands = append(subcommands, newBackupCmd) }

func newBackupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Archive the data directory, while nekro serves, into FILE (a .tar.gz)",
		Long: `Archive the data directory into FILE, a gzipped tar: a consistent snapshot
of the SQLite database, the API token, names.key, plugins' settings and
files, and the contents of the chats' uploads and shared directories (never
their sparse volume images). nekro serve may go on serving meanwhile.
FILE holds the API token and every chat: it is written mode 0600; keep it so.

On PostgreSQL, back the database up with pg_dump of the server's major
version: nekro backup then archives the data directory only. Restore with
nekro restore FILE --data NEWDIR.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := backup.CreateFile(cmd.Context(), backup.Options{DataDir: g.dataDir, DatabaseURL: g.database, Log: g.logger(),
				Version: versionLine(readVersion())}, args[0])
			if err != nil {
				return err
			}
			if m.Database != backup.DatabaseSQLite {
				fmt.Fprintf(cmd.OutOrStdout(), "backed up the data directory %s to %s; the database is PostgreSQL and NOT in it: dump it with pg_dump\n", g.dataDir, args[0])
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s (schema versions %v)\n", g.dataDir, args[0], m.Schema)
			return nil
		},
	}
	g.addStoreFlags(cmd)
	return cmd
}
