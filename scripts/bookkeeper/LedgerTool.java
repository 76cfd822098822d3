// LedgerTool: a tiny program on BookKeeper's own Java client, used by the
// Go client's real-bookie tests as the compatibility oracle in both
// directions. Test harness only. Run through the env script (single-file
// source launch, no build step):
//
//   scripts/bookkeeper-env.sh java scripts/bookkeeper/LedgerTool.java CLIENT_CONF COMMAND ARGS...
//
// Commands (one result line per fact, prefixed so tests can grep):
//   write LEDGER_ID N SIZE DIGEST PASSWORD E W A CLOSE(true|false) V2(true|false)
//       creates the ledger with that explicit ID (createLedgerAdv), writes N
//       entries with payload(ledger, entry, SIZE), closes it unless CLOSE is
//       false (then exits without closing: a crashed writer). Prints
//       "WROTE <ledger> <lastAddConfirmed>".
//   read LEDGER_ID DIGEST PASSWORD RECOVER(true|false) V2(true|false)
//       opens the ledger (recovery open if RECOVER, else no-recovery), prints
//       "META <state> <lastEntryId> <length> <E> <W> <A> <digest>" and one
//       "ENTRY <id> <length> <sha256 of payload>" per entry 0..LAC.
//
// payload(ledger, entry, size) is ASCII "J<ledger>-E<entry>|" followed by
// the byte (entry & 0xff) up to size bytes; the Go tests use the same rule.

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.Map;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class LedgerTool {
    static byte[] payload(long ledger, long entry, int size) {
        byte[] p = new byte[size];
        java.util.Arrays.fill(p, (byte) (entry & 0xff));
        byte[] prefix = ("J" + ledger + "-E" + entry + "|").getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(prefix, 0, p, 0, Math.min(prefix.length, size));
        return p;
    }

    static BookKeeper.DigestType digest(String s) {
        switch (s) {
            case "CRC32": return BookKeeper.DigestType.CRC32;
            case "CRC32C": return BookKeeper.DigestType.CRC32C;
            case "MAC": return BookKeeper.DigestType.MAC;
            case "DUMMY": return BookKeeper.DigestType.DUMMY;
            default: throw new IllegalArgumentException("digest " + s);
        }
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x));
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        ClientConfiguration conf = new ClientConfiguration();
        conf.loadConf(new File(args[0]).toURI().toURL());
        conf.setAddEntryTimeout(30);
        conf.setReadEntryTimeout(30);
        String cmd = args[1];
        boolean v2 = Boolean.parseBoolean(args[args.length - 1]);
        conf.setUseV2WireProtocol(v2);
        BookKeeper bk = new BookKeeper(conf);
        if (cmd.equals("write")) {
            long id = Long.parseLong(args[2]);
            int n = Integer.parseInt(args[3]);
            int size = Integer.parseInt(args[4]);
            BookKeeper.DigestType dt = digest(args[5]);
            byte[] pw = args[6].getBytes(StandardCharsets.UTF_8);
            int e = Integer.parseInt(args[7]), w = Integer.parseInt(args[8]), a = Integer.parseInt(args[9]);
            boolean close = Boolean.parseBoolean(args[10]);
            Map<String, byte[]> custom = new HashMap<>();
            custom.put("writer", "java-ledgertool".getBytes(StandardCharsets.UTF_8));
            LedgerHandle lh = bk.createLedgerAdv(id, e, w, a, dt, pw, custom);
            for (long i = 0; i < n; i++) {
                lh.addEntry(i, payload(id, i, size));
            }
            System.out.println("WROTE " + id + " " + lh.getLastAddConfirmed());
            System.out.flush();
            if (!close) {
                // A crashed writer: no close, no goodbye to the bookies.
                Runtime.getRuntime().halt(0);
            }
            lh.close();
        } else if (cmd.equals("read")) {
            long id = Long.parseLong(args[2]);
            BookKeeper.DigestType dt = digest(args[3]);
            byte[] pw = args[4].getBytes(StandardCharsets.UTF_8);
            boolean recover = Boolean.parseBoolean(args[5]);
            LedgerHandle lh = recover ? bk.openLedger(id, dt, pw) : bk.openLedgerNoRecovery(id, dt, pw);
            LedgerMetadata md = lh.getLedgerMetadata();
            System.out.println("META " + md.getState() + " " + md.getLastEntryId() + " " + md.getLength() + " "
                    + md.getEnsembleSize() + " " + md.getWriteQuorumSize() + " " + md.getAckQuorumSize() + " "
                    + md.getDigestType());
            long lac = lh.getLastAddConfirmed();
            if (lac >= 0) {
                Enumeration<LedgerEntry> en = lh.readEntries(0, lac);
                while (en.hasMoreElements()) {
                    LedgerEntry ent = en.nextElement();
                    byte[] data = ent.getEntry();
                    MessageDigest sha = MessageDigest.getInstance("SHA-256");
                    System.out.println("ENTRY " + ent.getEntryId() + " " + ent.getLength() + " " + hex(sha.digest(data)));
                }
            }
            lh.close();
        } else {
            throw new IllegalArgumentException("unknown command " + cmd);
        }
        bk.close();
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
