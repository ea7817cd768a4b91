package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/backup"
)

func init() { subcommands = append(subcommands, newRestoreCmd) }

func newRestoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Restore a nekro backup into an empty data directory (--data)",
		Long: `Restore FILE, made by nekro backup, into the data directory --data, which
must be missing or empty. The chats' and plugins' files come back as plain
directories; nekro serve moves each into a fresh volume (--shared-quota,
--plugin-data-quota) the first time it is used. A binary older than the one
that made the backup refuses the restored database: restore with that
version or a newer one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := backup.RestoreFile(cmd.Context(), args[0], g.dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s (made %s by nekro %s) into %s\n",
				args[0], m.Created.Format("2006-01-02 15:04:05Z"), m.Version, g.dataDir)
			if m.Database != backup.DatabaseSQLite {
				fmt.Fprintln(cmd.OutOrStdout(), "the archive holds no database (it was PostgreSQL): restore its pg_dump, and point --database at it")
			}
			return nil
		},
	}
	g.addFlags(cmd, "data", "log-level")
	return cmd
}
