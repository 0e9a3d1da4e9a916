// Warren's Java kernel: Java code runs in JShell, the JDK's own REPL engine
// (the jdk.jshell API), in this JVM. One process per context.
//
// Protocol, the same as kernel.js: requests are JSON lines on stdin,
// {"id": n, "code": "..."}; messages go out as JSON lines on fd 3:
//   {"type": "stdout"|"stderr", "text": "..."}
//   {"type": "result", "id": n, "text": "..."}        value of the last expression
//   {"type": "error", "id": n, "name", "value", "traceback"}
//   {"type": "done", "id": n}
// SIGINT stops the running code (Thread.stop, as jshell's own local engine
// does); between executions it is ignored.
//
// A cell is split into snippets with SourceCodeAnalysis, as the jshell tool
// does, and they are evaluated in order until one fails. State (variables,
// methods, classes, imports) lives in the one JShell instance. The value of
// a final expression not ended by a semicolon is the result; strings and
// chars are shown as text, other values as jshell shows them.
//
// Per-execution and sandbox env vars are set by code the server sends
// (setEnv, overrideEnv, restoreEnv below): as System properties, which is
// where E2B's Java kernel puts them, and in the JVM's copy of the
// environment, so that System.getenv sees them as the other languages'
// lookups do. (Java cannot change the process's own environment: a child
// process inherits it unless its ProcessBuilder's environment() is used.)
package warren;

import java.io.ByteArrayInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.BufferedReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.SourceCodeAnalysis.Completeness;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.execution.LocalExecutionControl;
import jdk.jshell.spi.ExecutionControl;
import jdk.jshell.spi.ExecutionControlProvider;
import jdk.jshell.spi.ExecutionEnv;

public final class JShellKernel {
    // The jshell tool's default imports, so that code written for jshell runs.
    private static final String[] IMPORTS = {
        "java.io.*", "java.math.*", "java.net.*", "java.nio.file.*", "java.util.*",
        "java.util.concurrent.*", "java.util.function.*", "java.util.prefs.*",
        "java.util.regex.*", "java.util.stream.*",
    };

    private static PrintStream protocol; // fd 3; every message goes through send

    private final JShell shell;
    private final SourceCodeAnalysis analysis;
    private final Control control = new Control();
    private volatile boolean interrupted;

    private JShellKernel() {
        shell = JShell.builder()
            .executionEngine(new ExecutionControlProvider() {
                public String name() { return "warren"; }
                public ExecutionControl generate(ExecutionEnv env, Map<String, String> params) { return control; }
            }, Map.of())
            // Snippets may call this class (setEnv); it is on the JVM's class path.
            .compilerOptions("--class-path", System.getProperty("java.class.path"))
            .build();
        analysis = shell.sourceCodeAnalysis();
        for (String pkg : IMPORTS) {
            shell.eval("import " + pkg + ";");
        }
    }

    public static void main(String[] args) throws IOException {
        protocol = new PrintStream(openProtocol(), true, StandardCharsets.UTF_8);
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        // User code gets no stdin (the requests come there) and prints
        // into protocol messages, ordered with results.
        System.setIn(new ByteArrayInputStream(new byte[0]));
        System.setOut(new MessageStream("stdout"));
        System.setErr(new MessageStream("stderr"));
        JShellKernel k = new JShellKernel();
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), sig -> k.interrupt());
        for (String line; (line = requests.readLine()) != null; ) {
            Map<String, Object> req = Json.parseObject(line);
            int id = ((Number) req.get("id")).intValue();
            try {
                k.execute(id, (String) req.get("code"));
            } catch (RuntimeException e) {
                // JShell itself failed: say so, and stay up for the next cell.
                send("{\"type\":\"error\",\"id\":" + id + ",\"name\":" + Json.quote(e.getClass().getName())
                    + ",\"value\":" + Json.quote(String.valueOf(e.getMessage())) + ",\"traceback\":" + Json.quote(stackTrace(e)) + "}");
            }
            send("{\"type\":\"done\",\"id\":" + id + "}");
        }
        System.exit(0);
    }

    // openProtocol opens fd 3, which must be the pipe the server reads: an
    // fd 3 left over to a file must not be truncated or written into.
    private static OutputStream openProtocol() throws IOException {
        Path fd = Path.of("/proc/self/fd/3");
        BasicFileAttributes a = Files.readAttributes(fd, BasicFileAttributes.class);
        if (!a.isOther()) {
            throw new IOException("fd 3 is not a pipe: it must be where the kernel's messages go");
        }
        return new FileOutputStream(fd.toFile(), true);
    }

    private void interrupt() {
        interrupted = true;
        control.stop();
    }

    private void execute(int id, String code) {
        interrupted = false;
        String result = null;
        for (String rest = code; !interrupted; ) {
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(rest);
            if (info.completeness() == Completeness.EMPTY) {
                break;
            }
            String source = info.source();
            if (!info.completeness().isComplete()) {
                // Unfinished code: evaluating it reports the syntax error.
                source = rest;
                rest = "";
            } else {
                rest = info.remaining();
            }
            // A final expression is the cell's value unless a semicolon
            // ends it: `x = 5` shows 5, `x = 5;` nothing.
            boolean open = !source.strip().endsWith(";");
            control.value.set(null);
            result = null;
            for (SnippetEvent e : shell.eval(source)) {
                if (e.causeSnippet() != null) {
                    continue; // a dependent snippet updated, not this one
                }
                if (interrupted) {
                    break;
                }
                if (e.exception() != null) {
                    sendError(id, e.exception());
                    return;
                }
                if (e.status() == Snippet.Status.REJECTED) {
                    sendCompileError(id, e.snippet());
                    return;
                }
                if (open && hasValue(e.snippet())) {
                    result = render(control.value.get());
                }
            }
            if (rest.isBlank()) {
                break;
            }
        }
        if (interrupted) {
            send("{\"type\":\"error\",\"id\":" + id + ",\"name\":\"KeyboardInterrupt\",\"value\":\"Execution interrupted\",\"traceback\":\"\"}");
        } else if (result != null) {
            send("{\"type\":\"result\",\"id\":" + id + ",\"text\":" + Json.quote(result) + "}");
        }
    }

    // hasValue says whether the snippet is an expression with a value
    // (`1 + 1`, `x`, `x = 2`, a call of a non-void method): declarations,
    // statements and void calls have none, as a Python assignment has none.
    private static boolean hasValue(Snippet s) {
        switch (s.subKind()) {
            case TEMP_VAR_EXPRESSION_SUBKIND:
            case VAR_VALUE_SUBKIND:
            case ASSIGNMENT_SUBKIND:
                return true;
            default:
                return false;
        }
    }

    private static String render(Object v) {
        if (v instanceof String || v instanceof Character) {
            return v.toString();
        }
        return Control.show(v);
    }

    private void sendError(int id, JShellException ex) {
        String name = ex.getClass().getName();
        String value = ex.getMessage();
        if (ex instanceof EvalException) {
            name = ((EvalException) ex).getExceptionClassName();
        } else if (ex instanceof UnresolvedReferenceException) {
            jdk.jshell.DeclarationSnippet s = ((UnresolvedReferenceException) ex).getSnippet();
            value = s.name() + " cannot be used until " + String.join(", ", shell.unresolvedDependencies(s).toList()) + " is declared";
        }
        if (value == null) {
            value = "";
        }
        StringBuilder tb = new StringBuilder();
        for (Throwable t = ex; t != null; t = t.getCause()) {
            if (t != ex) {
                tb.append("Caused by: ");
            }
            String n = t instanceof EvalException ? ((EvalException) t).getExceptionClassName() : t.getClass().getName();
            tb.append(n);
            if (t.getMessage() != null) {
                tb.append(": ").append(t.getMessage());
            }
            tb.append('\n');
            for (StackTraceElement f : t.getStackTrace()) {
                tb.append("\tat ").append(frame(f)).append('\n');
            }
        }
        send("{\"type\":\"error\",\"id\":" + id + ",\"name\":" + Json.quote(name) + ",\"value\":" + Json.quote(value)
            + ",\"traceback\":" + Json.quote(tb.toString()) + "}");
    }

    private static String stackTrace(Throwable e) {
        java.io.StringWriter w = new java.io.StringWriter();
        e.printStackTrace(new java.io.PrintWriter(w));
        return w.toString();
    }

    // frame shows a frame of snippet code as the jshell tool does,
    // `method(#snippet:line)`: jshell reports the wrapper classes snippets
    // run in with an empty class name.
    private static String frame(StackTraceElement f) {
        if (!f.getClassName().isEmpty()) {
            return f.toString();
        }
        String method = f.getMethodName().equals("do_it$") ? "" : f.getMethodName();
        return method + "(" + f.getFileName() + ":" + f.getLineNumber() + ")";
    }

    private void sendCompileError(int id, Snippet s) {
        List<Diag> diags = shell.diagnostics(s).toList();
        String first = diags.isEmpty() ? "the snippet was rejected" : diags.get(0).getMessage(Locale.ROOT).strip();
        StringBuilder tb = new StringBuilder();
        String src = s.source();
        for (Diag d : diags) {
            tb.append(d.isError() ? "Error: " : "Warning: ").append(d.getMessage(Locale.ROOT)).append('\n');
            int at = (int) Math.max(0, Math.min(d.getStartPosition(), src.length()));
            int start = src.lastIndexOf('\n', at - 1) + 1;
            int end = src.indexOf('\n', at);
            if (end < 0) {
                end = src.length();
            }
            tb.append(src, start, end).append('\n').append(" ".repeat(at - start)).append("^\n");
        }
        send("{\"type\":\"error\",\"id\":" + id + ",\"name\":\"CompilationException\",\"value\":" + Json.quote(first)
            + ",\"traceback\":" + Json.quote(tb.toString()) + "}");
    }

    static synchronized void send(String line) {
        protocol.print(line + "\n");
        protocol.flush();
    }

    // Env vars, set by code the server runs before and after a cell. Saved
    // values are kept here, out of the user's snippets.
    private static final Map<String, String[]> saved = new HashMap<>();

    /** Sets each name-value pair as a System property and an env var. */
    public static void setEnv(String... kv) {
        for (int i = 0; i + 1 < kv.length; i += 2) {
            put(kv[i], kv[i + 1], kv[i + 1]);
        }
    }

    /** Like setEnv, remembering the previous values for restoreEnv. */
    public static void overrideEnv(String... kv) {
        saved.clear();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            saved.put(kv[i], new String[] {System.getProperty(kv[i]), System.getenv(kv[i])});
        }
        setEnv(kv);
    }

    /** Puts back what overrideEnv replaced: the old value, or none at all. */
    public static void restoreEnv() {
        saved.forEach((k, v) -> put(k, v[0], v[1]));
        saved.clear();
    }

    private static void put(String name, String property, String env) {
        if (property == null) {
            System.clearProperty(name);
        } else {
            System.setProperty(name, property);
        }
        Map<String, String> m = processEnv();
        if (env == null) {
            m.remove(name);
        } else {
            m.put(name, env);
        }
    }

    private static Map<String, String> processEnvMap;

    // processEnv is the JVM's own copy of the environment, behind
    // System.getenv()'s unmodifiable view (and copied by
    // ProcessBuilder.environment()). Needs --add-opens
    // java.base/java.util=ALL-UNNAMED.
    @SuppressWarnings("unchecked")
    private static Map<String, String> processEnv() {
        if (processEnvMap == null) {
            Map<String, String> view = System.getenv();
            try {
                Field f = view.getClass().getDeclaredField("m");
                f.setAccessible(true);
                processEnvMap = (Map<String, String>) f.get(view);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("cannot reach the process environment: " + e, e);
            }
        }
        return processEnvMap;
    }

    // Control runs snippets in this JVM, like jshell's LocalExecutionControl
    // (on a thread of their own, stopped with Thread.stop), and keeps each
    // snippet's value as an object, where jshell keeps only its text.
    private static final class Control extends LocalExecutionControl {
        final AtomicReference<Object> value = new AtomicReference<>();
        private final Object lock = new Object();
        private Thread running; // guarded by lock

        static String show(Object v) {
            return valueString(v);
        }

        @Override
        protected String invoke(Method doit) throws Exception {
            AtomicReference<Object> res = new AtomicReference<>();
            AtomicReference<Throwable> thrown = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    res.set(doit.invoke(null));
                } catch (Throwable e) {
                    thrown.set(e);
                }
            }, "jshell");
            synchronized (lock) {
                running = t;
            }
            try {
                t.start();
                t.join();
            } finally {
                synchronized (lock) {
                    running = null;
                }
            }
            Throwable e = thrown.get();
            if (e instanceof InvocationTargetException && !(e.getCause() instanceof ThreadDeath)) {
                throw (InvocationTargetException) e;
            }
            if (e instanceof ThreadDeath || e != null && e.getCause() instanceof ThreadDeath) {
                throw new StoppedException();
            }
            if (e instanceof Exception) {
                throw (Exception) e;
            }
            if (e != null) {
                throw new InvocationTargetException(e);
            }
            value.set(res.get());
            return valueString(res.get());
        }

        @Override
        @SuppressWarnings("removal")
        public void stop() {
            synchronized (lock) {
                if (running != null) {
                    running.stop();
                }
            }
        }
    }

    // MessageStream turns what user code prints into protocol messages, one
    // per write, as it is printed. print and newline arrive as two writes,
    // as in E2B's Java kernel, whose println gives "text" then "\n".
    private static final class MessageStream extends PrintStream {
        MessageStream(String type) {
            super(new OutputStream() {
                private final java.io.ByteArrayOutputStream pending = new java.io.ByteArrayOutputStream();

                @Override
                public void write(int b) {
                    write(new byte[] {(byte) b}, 0, 1);
                }

                @Override
                public synchronized void write(byte[] b, int off, int len) {
                    pending.write(b, off, len);
                    byte[] all = pending.toByteArray();
                    int keep = incompleteTail(all);
                    if (all.length - keep > 0) {
                        String text = new String(all, 0, all.length - keep, StandardCharsets.UTF_8);
                        send("{\"type\":\"" + type + "\",\"text\":" + Json.quote(text) + "}");
                    }
                    pending.reset();
                    pending.write(all, all.length - keep, keep);
                }
            }, true, StandardCharsets.UTF_8);
        }

        // incompleteTail is the number of trailing bytes that begin a UTF-8
        // sequence a later write completes.
        private static int incompleteTail(byte[] b) {
            for (int n = 1; n <= Math.min(3, b.length); n++) {
                int c = b[b.length - n] & 0xff;
                if ((c & 0xc0) == 0x80) {
                    continue; // continuation byte
                }
                int need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
                return need > n ? n : 0;
            }
            return 0;
        }
    }

    // Json reads the requests, objects of strings and numbers, and quotes
    // strings for the messages.
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        static Map<String, Object> parseObject(String s) {
            Json j = new Json(s);
            Map<String, Object> m = new HashMap<>();
            j.expect('{');
            if (j.peek() == '}') {
                j.i++;
                return m;
            }
            do {
                String k = j.string();
                j.expect(':');
                m.put(k, j.peek() == '"' ? j.string() : j.number());
            } while (j.comma());
            j.expect('}');
            return m;
        }

        private char peek() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
            if (i >= s.length()) {
                throw new IllegalArgumentException("unexpected end of request");
            }
            return s.charAt(i);
        }

        private void expect(char c) {
            if (peek() != c) {
                throw new IllegalArgumentException("expected " + c + " at " + i + " of request");
            }
            i++;
        }

        private boolean comma() {
            if (peek() == ',') {
                i++;
                return true;
            }
            return false;
        }

        private Number number() {
            int start = i;
            while (i < s.length() && "+-.eE0123456789".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            return Double.valueOf(s.substring(start, i));
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            for (;;) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                c = s.charAt(i++);
                switch (c) {
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'n': b.append('\n'); break;
                    case 'r': b.append('\r'); break;
                    case 't': b.append('\t'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: b.append(c); // " \ /
                }
            }
        }

        static String quote(String s) {
            StringBuilder b = new StringBuilder(s.length() + 2).append('"');
            for (int k = 0; k < s.length(); k++) {
                char c = s.charAt(k);
                switch (c) {
                    case '"': b.append("\\\""); break;
                    case '\\': b.append("\\\\"); break;
                    case '\n': b.append("\\n"); break;
                    case '\r': b.append("\\r"); break;
                    case '\t': b.append("\\t"); break;
                    default:
                        if (c < 0x20 || Character.isSurrogate(c) && !validSurrogate(s, k)) {
                            b.append(String.format("\\u%04x", (int) (c < 0x20 ? c : 0xfffd)));
                        } else {
                            b.append(c);
                        }
                }
            }
            return b.append('"').toString();
        }

        // validSurrogate: a lone surrogate is not valid JSON text for Go;
        // it is sent as U+FFFD.
        private static boolean validSurrogate(String s, int k) {
            char c = s.charAt(k);
            if (Character.isHighSurrogate(c)) {
                return k + 1 < s.length() && Character.isLowSurrogate(s.charAt(k + 1));
            }
            return k > 0 && Character.isHighSurrogate(s.charAt(k - 1));
        }
    }
}
