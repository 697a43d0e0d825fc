// pgjdbc through pgturnstile's sharding router (integration/shard_drivers_test.go).
//
// Usage: java -cp classes:postgresql.jar Shard JDBC_URL KEYS_FILE
//
// KEYS_FILE has one key a line: "colo<TAB>group<TAB>key", colo org (files,
// bigint), tenant (tenants, text) or dev (devices, uuid); group is the
// database Postgres places the key on (batches take keys of one group, since
// a batch is one transaction). Each key is inserted once, the modes taking
// turns by key, with pgjdbc's default settings (extended protocol,
// prepareThreshold 5, binary int8 and uuid parameters) unless the mode says:
//
//   v=1 stmt      Statement.executeUpdate, the key a literal in the text
//   v=2 prepared  one PreparedStatement per table, executed key by key (unnamed
//                 at first, a named server-side statement from the fifth use)
//   v=3 batch     PreparedStatement.addBatch/executeBatch, 50 keys of a group
//
// Not here, because the router does not route them (see the test):
// transactions (setAutoCommit(false): pgjdbc sends its BEGIN on the extended
// protocol, ahead of the first statement, and the router sends that to the
// cluster's default database), and preferQueryMode=simple (pgjdbc inlines
// each parameter in parentheses, ('42'::int8), a value the router's fast
// path does not read).
//
// It prints "inserted <colo> <mode> <v> <n>" for each colo and mode, then
// reads every key back through the router (a PreparedStatement counting its
// rows) and prints "read <colo> <rows>". Any error ends it with a stack trace
// and status 1.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

public class Shard {
    record Key(String colo, String group, String key) {}

    static final String[] COLOS = {"org", "tenant", "dev"};
    static final String[] MODES = {"stmt", "prepared", "batch"};

    static String insertSQL(String colo) {
        return switch (colo) {
            case "org" -> "INSERT INTO files (org_id, name, v) VALUES (?, 'pgjdbc', ?)";
            case "tenant" -> "INSERT INTO tenants (name, v) VALUES (?, ?)";
            default -> "INSERT INTO devices (id, v) VALUES (?, ?)";
        };
    }

    static String countSQL(String colo) {
        return switch (colo) {
            case "org" -> "SELECT count(*) FROM files WHERE org_id = ?";
            case "tenant" -> "SELECT count(*) FROM tenants WHERE name = ?";
            default -> "SELECT count(*) FROM devices WHERE id = ?";
        };
    }

    static String literalSQL(Key k, int v) {
        String lit = k.colo().equals("org") ? k.key() : "'" + k.key().replace("'", "''") + "'";
        return switch (k.colo()) {
            case "org" -> "INSERT INTO files (org_id, name, v) VALUES (" + lit + ", 'pgjdbc', " + v + ")";
            case "tenant" -> "INSERT INTO tenants (name, v) VALUES (" + lit + ", " + v + ")";
            default -> "INSERT INTO devices (id, v) VALUES (" + lit + ", " + v + ")";
        };
    }

    static void bindKey(PreparedStatement ps, int i, Key k) throws SQLException {
        switch (k.colo()) {
            case "org" -> ps.setLong(i, Long.parseLong(k.key()));
            case "tenant" -> ps.setString(i, k.key());
            default -> ps.setObject(i, UUID.fromString(k.key()));
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        Map<String, List<Key>> byColo = new LinkedHashMap<>();
        for (String c : COLOS) {
            byColo.put(c, new ArrayList<>());
        }
        for (String line : Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", 3);
            byColo.get(f[0]).add(new Key(f[0], f[1], f[2]));
        }
        try (Connection c = DriverManager.getConnection(url)) {
            for (String colo : COLOS) {
                List<Key> keys = byColo.get(colo);
                // Keys by mode, in file order.
                List<List<Key>> per = new ArrayList<>();
                for (int m = 0; m < MODES.length; m++) {
                    per.add(new ArrayList<>());
                }
                for (int i = 0; i < keys.size(); i++) {
                    per.get(i % MODES.length).add(keys.get(i));
                }
                try (Statement st = c.createStatement()) {
                    for (Key k : per.get(0)) {
                        check(st.executeUpdate(literalSQL(k, 1)), k);
                    }
                }
                try (PreparedStatement ps = c.prepareStatement(insertSQL(colo))) {
                    for (Key k : per.get(1)) {
                        bindKey(ps, 1, k);
                        ps.setInt(2, 2);
                        check(ps.executeUpdate(), k);
                    }
                }
                try (PreparedStatement ps = c.prepareStatement(insertSQL(colo))) {
                    Map<String, List<Key>> groups = new TreeMap<>();
                    for (Key k : per.get(2)) {
                        groups.computeIfAbsent(k.group(), g -> new ArrayList<>()).add(k);
                    }
                    for (List<Key> g : groups.values()) {
                        for (int at = 0; at < g.size(); at += 50) {
                            List<Key> chunk = g.subList(at, Math.min(at + 50, g.size()));
                            for (Key k : chunk) {
                                bindKey(ps, 1, k);
                                ps.setInt(2, 3);
                                ps.addBatch();
                            }
                            int[] counts = ps.executeBatch();
                            if (counts.length != chunk.size()) {
                                throw new IllegalStateException("batch of " + chunk.size() + ": " + counts.length + " counts");
                            }
                            for (int i = 0; i < counts.length; i++) {
                                check(counts[i], chunk.get(i));
                            }
                        }
                    }
                }
                for (int m = 0; m < MODES.length; m++) {
                    System.out.println("inserted " + colo + " " + MODES[m] + " " + (m + 1) + " " + per.get(m).size());
                }
            }
            for (String colo : COLOS) {
                long rows = 0;
                try (PreparedStatement ps = c.prepareStatement(countSQL(colo))) {
                    for (Key k : byColo.get(colo)) {
                        bindKey(ps, 1, k);
                        try (ResultSet rs = ps.executeQuery()) {
                            rs.next();
                            rows += rs.getLong(1);
                        }
                    }
                }
                System.out.println("read " + colo + " " + rows);
            }
        }
    }

    static void check(int n, Key k) {
        if (n != 1) {
            throw new IllegalStateException(k + ": " + n + " rows");
        }
    }
}
