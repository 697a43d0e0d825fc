// pgjdbc through pgturnstile's sharding router (integration/shard_drivers_test.go).
//
// Usage: java -cp classes:postgresql.jar Shard JDBC_URL KEYS_FILE
//
// KEYS_FILE has one key a line: "colo<TAB>group<TAB>key", colo org (files,
// bigint), tenant (tenants, text) or dev (devices, uuid); group is the
// database Postgres places the key on (batches and transactions take keys of
// one group, since a transaction runs on one database). Each key is inserted
// once, the modes taking turns by key, with pgjdbc's default settings
// (extended protocol, prepareThreshold 5, binary int8 and uuid parameters)
// unless the mode says:
//
//   v=1 stmt      Statement.executeUpdate, the key a literal in the text
//   v=2 prepared  one PreparedStatement per table, executed key by key (unnamed
//                 at first, a named server-side statement from the fifth use)
//   v=3 batch     PreparedStatement.addBatch/executeBatch, 50 keys of a group
//   v=4 tx        setAutoCommit(false), a PreparedStatement executed for 5 keys
//                 of a group, commit(): pgjdbc sends its BEGIN (on the extended
//                 protocol, a named statement of its own from the first
//                 transaction on) in one batch with the first INSERT, up to
//                 one Sync, then each INSERT, then COMMIT (a named statement
//                 too, as is ROLLBACK, each prepared on one shard and executed
//                 on both)
//   v=5 txbatch   setAutoCommit(false), two executeBatch of 5 keys of a group
//                 each, commit(): BEGIN and the first batch in one Sync, the
//                 second batch inside the transaction
//   v=6 simple    a second connection with preferQueryMode=simple: a
//                 PreparedStatement executed key by key, which pgjdbc sends as
//                 one simple Query with each parameter inlined as a
//                 parenthesised literal, ('42'::int8), ('abc'), ('…'::uuid);
//                 each key then counted through that connection the same way
//
// Then it reads the org rows of each mode on every shard at once: one
// PreparedStatement "/* pgturnstile: shard=all */ SELECT org_id FROM files
// WHERE v = ?" executed for v = 1..6, twice, so that pgjdbc runs it as a
// named server-side statement from its fifth use (a scatter of a named
// statement), and prints "scattered org <v> <rows>" for each.
//
// In v=4 and v=5 the first transaction of each group inserts its keys with
// v=0 and is rolled back (rollback()), then the same keys are inserted again
// and committed: a rolled-back row left anywhere is a second row of its key.
//
// It prints "inserted <colo> <mode> <v> <n>" for each colo and mode and
// "rolledback <colo> <mode> <n>" for each transaction mode, then reads every
// key back through the router (a PreparedStatement counting its rows) and
// prints "read <colo> <rows>". Any error ends it with a stack trace and
// status 1.

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
    static final String[] MODES = {"stmt", "prepared", "batch", "tx", "txbatch", "simple"};

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
        try (Connection c = DriverManager.getConnection(url);
                Connection simple = DriverManager.getConnection(url + "&preferQueryMode=simple")) {
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
                // Transactions: each group's first chunk rolled back with
                // v=0, then every chunk committed.
                c.setAutoCommit(false);
                Map<String, Integer> rolled = new LinkedHashMap<>();
                try (PreparedStatement ps = c.prepareStatement(insertSQL(colo))) {
                    int n = 0;
                    for (List<List<Key>> chunks : chunks(per.get(3), 5)) {
                        n += chunks.get(0).size();
                        txInserts(c, ps, chunks.get(0), 0, true);
                        for (List<Key> chunk : chunks) {
                            txInserts(c, ps, chunk, 4, false);
                        }
                    }
                    rolled.put("tx", n);
                }
                try (PreparedStatement ps = c.prepareStatement(insertSQL(colo))) {
                    int n = 0;
                    for (List<List<Key>> chunks : chunks(per.get(4), 10)) {
                        n += chunks.get(0).size();
                        txBatches(c, ps, chunks.get(0), 0, true);
                        for (List<Key> chunk : chunks) {
                            txBatches(c, ps, chunk, 5, false);
                        }
                    }
                    rolled.put("txbatch", n);
                }
                c.setAutoCommit(true);
                try (PreparedStatement ps = simple.prepareStatement(insertSQL(colo));
                        PreparedStatement count = simple.prepareStatement(countSQL(colo))) {
                    for (Key k : per.get(5)) {
                        bindKey(ps, 1, k);
                        ps.setInt(2, 6);
                        check(ps.executeUpdate(), k);
                    }
                    for (Key k : per.get(5)) {
                        bindKey(count, 1, k);
                        try (ResultSet rs = count.executeQuery()) {
                            rs.next();
                            check((int) rs.getLong(1), k);
                        }
                    }
                }
                for (int m = 0; m < MODES.length; m++) {
                    System.out.println("inserted " + colo + " " + MODES[m] + " " + (m + 1) + " " + per.get(m).size());
                }
                for (Map.Entry<String, Integer> e : rolled.entrySet()) {
                    System.out.println("rolledback " + colo + " " + e.getKey() + " " + e.getValue());
                }
            }
            try (PreparedStatement ps = c.prepareStatement("/* pgturnstile: shard=all */ SELECT org_id FROM files WHERE v = ?")) {
                Map<Integer, Long> seen = new TreeMap<>();
                for (int round = 0; round < 2; round++) {
                    for (int v = 1; v <= MODES.length; v++) {
                        ps.setInt(1, v);
                        long rows = 0;
                        try (ResultSet rs = ps.executeQuery()) {
                            while (rs.next()) {
                                rows++;
                            }
                        }
                        Long before = seen.put(v, rows);
                        if (before != null && before != rows) {
                            throw new IllegalStateException("scatter of v=" + v + ": " + before + " rows, then " + rows);
                        }
                    }
                }
                for (Map.Entry<Integer, Long> e : seen.entrySet()) {
                    System.out.println("scattered org " + e.getKey() + " " + e.getValue());
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

    // chunks splits keys by group (in group order) into chunks of at most
    // size keys.
    static List<List<List<Key>>> chunks(List<Key> keys, int size) {
        Map<String, List<Key>> groups = new TreeMap<>();
        for (Key k : keys) {
            groups.computeIfAbsent(k.group(), g -> new ArrayList<>()).add(k);
        }
        List<List<List<Key>>> out = new ArrayList<>();
        for (List<Key> g : groups.values()) {
            List<List<Key>> cs = new ArrayList<>();
            for (int at = 0; at < g.size(); at += size) {
                cs.add(g.subList(at, Math.min(at + size, g.size())));
            }
            out.add(cs);
        }
        return out;
    }

    // txInserts inserts keys with v, one executeUpdate each, in one
    // transaction (autocommit off), then commits or rolls back.
    static void txInserts(Connection c, PreparedStatement ps, List<Key> keys, int v, boolean rollback) throws SQLException {
        for (Key k : keys) {
            bindKey(ps, 1, k);
            ps.setInt(2, v);
            check(ps.executeUpdate(), k);
        }
        if (rollback) {
            c.rollback();
        } else {
            c.commit();
        }
    }

    // txBatches inserts keys with v in two executeBatch calls (the first
    // half, then the rest) in one transaction, then commits or rolls back.
    static void txBatches(Connection c, PreparedStatement ps, List<Key> keys, int v, boolean rollback) throws SQLException {
        int half = (keys.size() + 1) / 2;
        for (List<Key> part : List.of(keys.subList(0, half), keys.subList(half, keys.size()))) {
            if (part.isEmpty()) {
                continue;
            }
            for (Key k : part) {
                bindKey(ps, 1, k);
                ps.setInt(2, v);
                ps.addBatch();
            }
            int[] counts = ps.executeBatch();
            if (counts.length != part.size()) {
                throw new IllegalStateException("batch of " + part.size() + ": " + counts.length + " counts");
            }
            for (int i = 0; i < counts.length; i++) {
                check(counts[i], part.get(i));
            }
        }
        if (rollback) {
            c.rollback();
        } else {
            c.commit();
        }
    }

    static void check(int n, Key k) {
        if (n != 1) {
            throw new IllegalStateException(k + ": " + n + " rows");
        }
    }
}
