// pgjdbc side of pgturnstile's driver matrix (see ../doc.go).
//
// Usage: java -cp <classes>:/usr/share/java/postgresql.jar Matrix <jdbc-url>
// The URL carries prepareThreshold=1, so every PreparedStatement is a
// server-side named statement from its first execution. Runs the scenarios
// with DRV_CLIENTS concurrent clients (threads) and prints one
// "<scenario> key=value..." line each, or "<scenario> ERROR <message>".

import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

public class Matrix {
    static final int CLIENTS = Integer.parseInt(System.getenv("DRV_CLIENTS"));
    static final int TXNS = Integer.parseInt(System.getenv("DRV_TXNS"));
    static final int PIPELINE = Integer.parseInt(System.getenv("DRV_PIPELINE"));
    static final int ERROR_ROUNDS = Integer.parseInt(System.getenv("DRV_ERROR_ROUNDS"));
    static final String COPY_FILE = System.getenv("DRV_COPY_FILE");

    // Shared with scenarios_test.go ($n written as JDBC's ?).
    static final String PREP_SELECT = "SELECT ?::int AS client, ?::int AS seq";
    static final String PREP_INSERT = "INSERT INTO prep_log (client, seq) VALUES (?, ?)";
    static final String PREP_CHECK = "SELECT count(*), count(DISTINCT (client, seq)), sum(client * 1000 + seq) FROM prep_log";
    static final String PIPE_INSERT = "INSERT INTO pipe_t (client, i, v) VALUES (?, ?, ?)";
    static final String ERR_INSERT = "INSERT INTO err_t (client) VALUES (?)";
    static final String ERR_FAIL = "SELECT tagged_fail(?)";
    static final String ERR_CHECK = "SELECT count(*) FROM err_t WHERE client = ?";
    static final String ROWS_SQL = "SELECT g, md5(g::text) FROM generate_series(1, 100000) AS g";
    static final String COPY_OUT_SQL = "COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT";
    static final String TYPES_SQL = "SELECT ?::text, ?::bytea, ?::numeric, ?::timestamptz, "
            + "md5(?::text), char_length(?::text), md5(?::bytea), ?::numeric::text, ?::timestamptz::text";
    static final String TYPES_TEXT = "h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c\u8a9e \uD83D\uDE00 e\u0301 \u05e2\u05d1\u05e8\u05d9\u05ea\ttab\\back'q\"\n";
    static final String TYPES_NUMERIC = "-12345678901234567890.123456789012345678901234567890";
    static final OffsetDateTime TYPES_TS = OffsetDateTime.of(2024, 2, 29, 23, 59, 59, 123456000, ZoneOffset.UTC);

    static String url;

    interface Client {
        void run(Connection c, int id) throws Exception;
    }

    interface Scenario {
        String run() throws Exception;
    }

    static String line(String scenario, Object... kv) {
        StringBuilder sb = new StringBuilder(scenario);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            sb.append(' ').append(kv[i]).append('=').append(kv[i + 1]);
        }
        return sb.toString();
    }

    static String codes(Map<String, Integer> m) {
        if (m.size() == 1) {
            return m.keySet().iterator().next();
        }
        return m.toString();
    }

    static String hex8(byte[] digest) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            sb.append(String.format("%02x", digest[i]));
        }
        return sb.toString();
    }

    static void each(List<Connection> clients, Client fn) throws Exception {
        Exception[] errs = new Exception[clients.size()];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients.size(); i++) {
            final int k = i;
            Thread t = new Thread(() -> {
                try {
                    fn.run(clients.get(k), k + 1);
                } catch (Exception e) {
                    errs[k] = e;
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        for (Exception e : errs) {
            if (e != null) {
                throw e;
            }
        }
    }

    static String prepared(List<Connection> clients) throws Exception {
        AtomicInteger ok = new AtomicInteger();
        each(clients, (c, id) -> {
            c.setAutoCommit(false);
            try (PreparedStatement sel = c.prepareStatement(PREP_SELECT);
                 PreparedStatement ins = c.prepareStatement(PREP_INSERT)) {
                for (int seq = 1; seq <= TXNS; seq++) {
                    sel.setInt(1, id);
                    sel.setInt(2, seq);
                    try (ResultSet rs = sel.executeQuery()) {
                        rs.next();
                        if (rs.getInt(1) != id || rs.getInt(2) != seq) {
                            throw new AssertionError("client " + id + " seq " + seq + ": got " + rs.getInt(1) + "," + rs.getInt(2));
                        }
                    }
                    ins.setInt(1, id);
                    ins.setInt(2, seq);
                    ins.executeUpdate();
                    c.commit();
                    ok.incrementAndGet();
                }
            } finally {
                c.setAutoCommit(true);
            }
        });
        try (Statement st = clients.get(0).createStatement(); ResultSet rs = st.executeQuery(PREP_CHECK)) {
            rs.next();
            return line("prepared", "clients", CLIENTS, "txns", CLIENTS * TXNS, "ok", ok.get(),
                    "rows", rs.getLong(1), "distinct", rs.getLong(2), "sum", rs.getLong(3));
        }
    }

    // batch: each client inserts PIPELINE rows with one executeBatch, which
    // pgjdbc sends as a pipeline of Bind/Execute with one Sync.
    static String batch(List<Connection> clients) throws Exception {
        each(clients, (c, id) -> {
            c.setAutoCommit(false);
            try (PreparedStatement ins = c.prepareStatement(PIPE_INSERT)) {
                for (int i = 1; i <= PIPELINE; i++) {
                    ins.setInt(1, id);
                    ins.setInt(2, i);
                    ins.setString(3, "c" + id + "-" + i);
                    ins.addBatch();
                }
                int[] counts = ins.executeBatch();
                for (int n : counts) {
                    if (n != 1) {
                        throw new AssertionError("client " + id + ": batch counts " + Arrays.toString(counts));
                    }
                }
                c.commit();
            } finally {
                c.setAutoCommit(true);
            }
        });
        try (Statement st = clients.get(0).createStatement();
             ResultSet rs = st.executeQuery("SELECT count(*), count(*) FILTER (WHERE v = 'c' || client || '-' || i) FROM pipe_t")) {
            rs.next();
            return line("batch", "clients", CLIENTS, "statements", PIPELINE, "rows", rs.getLong(1), "ok", rs.getLong(2));
        }
    }

    static String copy(Connection c) throws Exception {
        CopyManager cm = c.unwrap(PGConnection.class).getCopyAPI();
        byte[] data = Files.readAllBytes(Paths.get(COPY_FILE));
        try (InputStream in = new FileInputStream(COPY_FILE)) {
            long n = cm.copyIn("COPY copy_t FROM STDIN", in);
            if (n != 100000) {
                throw new AssertionError("copyIn: " + n + " rows");
            }
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        cm.copyOut(COPY_OUT_SQL, out);
        byte[] got = out.toByteArray();
        int rows = 0;
        for (byte b : got) {
            if (b == '\n') {
                rows++;
            }
        }
        return line("copy", "rows", rows, "bytes", got.length,
                "sha256", hex8(MessageDigest.getInstance("SHA-256").digest(got)), "exact", Arrays.equals(got, data));
    }

    static String error(List<Connection> clients) throws Exception {
        AtomicInteger own = new AtomicInteger(), rolledBack = new AtomicInteger();
        Map<String, Integer> first = new TreeMap<>(), next = new TreeMap<>();
        each(clients, (c, id) -> {
            c.setAutoCommit(false);
            try (PreparedStatement ins = c.prepareStatement(ERR_INSERT);
                 PreparedStatement fail = c.prepareStatement(ERR_FAIL);
                 PreparedStatement check = c.prepareStatement(ERR_CHECK);
                 Statement st = c.createStatement()) {
                for (int r = 0; r < ERROR_ROUNDS; r++) {
                    ins.setInt(1, id);
                    ins.executeUpdate();
                    String code1 = "none", msg = "", code2 = "none";
                    fail.setInt(1, id);
                    try {
                        fail.executeQuery().close();
                    } catch (SQLException e) {
                        code1 = e.getSQLState();
                        msg = e.getMessage();
                    }
                    try {
                        st.executeQuery("SELECT 1").close();
                    } catch (SQLException e) {
                        code2 = e.getSQLState();
                    }
                    c.rollback();
                    check.setInt(1, id);
                    long n;
                    try (ResultSet rs = check.executeQuery()) {
                        rs.next();
                        n = rs.getLong(1);
                    }
                    c.commit();
                    synchronized (first) {
                        first.merge(code1, 1, Integer::sum);
                        next.merge(code2, 1, Integer::sum);
                    }
                    // pgjdbc's message is "ERROR: client N failed\n  Where: ...".
                    if (msg.startsWith("ERROR: client " + id + " failed\n") || msg.equals("ERROR: client " + id + " failed")) {
                        own.incrementAndGet();
                    }
                    if (n == 0) {
                        rolledBack.incrementAndGet();
                    }
                }
            } finally {
                c.setAutoCommit(true);
            }
        });
        return line("error", "clients", CLIENTS, "rounds", ERROR_ROUNDS, "first", codes(first),
                "own_message", own.get(), "next", codes(next), "rolled_back", rolledBack.get());
    }

    static String rowsLine(String scenario, ResultSet rs) throws Exception {
        MessageDigest h = MessageDigest.getInstance("SHA-256");
        int n = 0;
        while (rs.next()) {
            h.update((rs.getInt(1) + "|" + rs.getString(2) + "\n").getBytes(StandardCharsets.UTF_8));
            n++;
        }
        return line(scenario, "n", n, "sha256", hex8(h.digest()));
    }

    static String rows(Connection c) throws Exception {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(ROWS_SQL)) {
            return rowsLine("rows", rs);
        }
    }

    // rowsFetch: autocommit off and setFetchSize(1000): pgjdbc runs the query
    // in a portal and fetches it 1000 rows per Execute.
    static String rowsFetch(Connection c) throws Exception {
        c.setAutoCommit(false);
        try (PreparedStatement st = c.prepareStatement(ROWS_SQL)) {
            st.setFetchSize(1000);
            try (ResultSet rs = st.executeQuery()) {
                return rowsLine("rows_fetch", rs);
            }
        } finally {
            c.commit();
            c.setAutoCommit(true);
        }
    }

    static String types(Connection c) throws Exception {
        byte[] b = new byte[256];
        for (int i = 0; i < 256; i++) {
            b[i] = (byte) i;
        }
        BigDecimal n = new BigDecimal(TYPES_NUMERIC);
        try (PreparedStatement st = c.prepareStatement(TYPES_SQL)) {
            st.setString(1, TYPES_TEXT);
            st.setBytes(2, b);
            st.setBigDecimal(3, n);
            st.setObject(4, TYPES_TS);
            st.setString(5, TYPES_TEXT);
            st.setString(6, TYPES_TEXT);
            st.setBytes(7, b);
            st.setBigDecimal(8, n);
            st.setObject(9, TYPES_TS);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                boolean roundtrip = rs.getString(1).equals(TYPES_TEXT) && Arrays.equals(rs.getBytes(2), b)
                        && rs.getBigDecimal(3).toPlainString().equals(TYPES_NUMERIC)
                        && rs.getObject(4, OffsetDateTime.class).isEqual(TYPES_TS);
                if (!roundtrip) {
                    throw new AssertionError("round trip: " + rs.getString(1) + " " + rs.getBigDecimal(3) + " " + rs.getObject(4, OffsetDateTime.class));
                }
                return "types text_md5=" + rs.getString(5) + " chars=" + rs.getInt(6) + " bytea_md5=" + rs.getString(7)
                        + " numeric=" + rs.getString(8) + " timestamptz=" + rs.getString(9) + " roundtrip=true";
            }
        }
    }

    // currentSchema: pgjdbc's currentSchema is the search_path startup
    // parameter, a list; clients with different lists (one quoted, mixed
    // case) and one without take turns, and each must see its own schemas.
    static String currentSchema() throws Exception {
        String[] schemas = {"sp_a,public", "\"Sp_B\",public", "Sp_C", null};
        List<Connection> conns = new ArrayList<>();
        try {
            for (String s : schemas) {
                String u = s == null ? url : url + "&currentSchema=" + java.net.URLEncoder.encode(s, StandardCharsets.UTF_8);
                conns.add(DriverManager.getConnection(u));
            }
            StringBuilder seen = new StringBuilder();
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < conns.size(); i++) {
                    try (Statement st = conns.get(i).createStatement()) {
                        String got;
                        try (ResultSet rs = st.executeQuery("SELECT current_setting('search_path'), current_schemas(false)::text")) {
                            rs.next();
                            got = rs.getString(1) + "|" + rs.getString(2);
                        }
                        try (ResultSet rs = st.executeQuery("SELECT v FROM sp_probe")) {
                            rs.next();
                            got += "|" + rs.getString(1);
                        } catch (SQLException e) {
                            got += "|" + e.getSQLState();
                        }
                        if (round == 0) {
                            seen.append(" c").append(i + 1).append('=').append(got.replace(' ', '_'));
                        } else if (!seen.toString().contains(" c" + (i + 1) + "=" + got.replace(' ', '_'))) {
                            throw new AssertionError("client " + (i + 1) + " round " + round + " saw " + got);
                        }
                    }
                }
            }
            return "current_schema" + seen;
        } finally {
            for (Connection c : conns) {
                c.close();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        url = args[0];
        List<Connection> clients = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            clients.add(DriverManager.getConnection(url));
        }
        boolean failed = false;
        Object[][] scenarios = {
            {"prepared", (Scenario) () -> prepared(clients)},
            {"batch", (Scenario) () -> batch(clients)},
            {"copy", (Scenario) () -> copy(clients.get(0))},
            {"error", (Scenario) () -> error(clients)},
            {"rows", (Scenario) () -> rows(clients.get(0))},
            {"rows_fetch", (Scenario) () -> rowsFetch(clients.get(0))},
            {"types", (Scenario) () -> types(clients.get(0))},
            {"current_schema", (Scenario) () -> currentSchema()},
        };
        for (Object[] s : scenarios) {
            try {
                System.out.println(((Scenario) s[1]).run());
            } catch (Throwable e) {
                failed = true;
                System.out.println(s[0] + " ERROR " + String.valueOf(e).replace("\n", " | "));
                e.printStackTrace();
                for (Connection c : clients) {
                    try {
                        if (!c.getAutoCommit()) {
                            c.rollback();
                        }
                    } catch (SQLException ignored) {
                        // the scenario's error is what counts
                    }
                }
            }
            System.out.flush();
        }
        for (Connection c : clients) {
            c.close();
        }
        System.exit(failed ? 1 : 0);
    }
}
