import { useEffect, useRef, useState } from "preact/hooks";
import { base, csrfToken } from "../api";

// Screen is a small terminal model: enough of VT100 for a shell's line
// editing (cursor moves, erase in line, clear screen); other escape
// sequences (colours, modes, titles) are dropped.
class Screen {
  lines: string[] = [""];
  col = 0;
  private pending = "";

  write(text: string): void {
    let s = this.pending + text;
    this.pending = "";
    let i = 0;
    while (i < s.length) {
      const ch = s[i];
      if (ch === "\x1b") {
        const rest = s.slice(i);
        const csi = /^\x1b\[([0-?]*)[ -/]*([@-~])/.exec(rest);
        const osc = /^\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/.exec(rest);
        const other = /^\x1b(?:[()][0-9A-Za-z]|[=>78cDEHMNOZ])/.exec(rest);
        if (csi) {
          this.csi(csi[1], csi[2]);
          i += csi[0].length;
        } else if (osc) {
          i += osc[0].length;
        } else if (other) {
          i += other[0].length;
        } else if (rest.length < 64 && !/[\x07]/.test(rest)) {
          this.pending = rest; // an incomplete sequence: wait for the rest
          return;
        } else {
          i++;
        }
        continue;
      }
      switch (ch) {
        case "\n":
          this.lines.push("");
          this.col = 0;
          break;
        case "\r":
          this.col = 0;
          break;
        case "\b":
          this.col = Math.max(0, this.col - 1);
          break;
        case "\x07":
          break;
        case "\t":
          this.put(" ".repeat(8 - (this.col % 8)));
          break;
        default:
          if (ch >= " ") this.put(ch);
      }
      i++;
    }
    if (this.lines.length > 2000) this.lines = this.lines.slice(-2000);
  }

  private get line(): string {
    return this.lines[this.lines.length - 1];
  }
  private set line(v: string) {
    this.lines[this.lines.length - 1] = v;
  }

  private put(t: string): void {
    const l = this.line.padEnd(this.col, " ");
    this.line = l.slice(0, this.col) + t + l.slice(this.col + t.length);
    this.col += t.length;
  }

  private csi(params: string, final: string): void {
    const n = parseInt(params || "1", 10) || 1;
    switch (final) {
      case "K":
        if (params === "" || params === "0") this.line = this.line.slice(0, this.col);
        else if (params === "2") this.line = "";
        break;
      case "C":
        this.col += n;
        break;
      case "D":
        this.col = Math.max(0, this.col - n);
        break;
      case "P":
        this.line = this.line.slice(0, this.col) + this.line.slice(this.col + n);
        break;
      case "@":
        this.line = this.line.slice(0, this.col) + " ".repeat(n) + this.line.slice(this.col);
        break;
      case "J":
        if (params === "2" || params === "3") {
          this.lines = [""];
          this.col = 0;
        }
        break;
      case "H":
        if (params === "") this.col = 0;
        break;
    }
  }
}

const keys: Record<string, string> = {
  Enter: "\r",
  Backspace: "\x7f",
  Escape: "\x1b",
  ArrowUp: "\x1b[A",
  ArrowDown: "\x1b[B",
  ArrowRight: "\x1b[C",
  ArrowLeft: "\x1b[D",
  Home: "\x1b[H",
  End: "\x1b[F",
  Delete: "\x1b[3~",
};

// Terminal is a shell in the sandbox over the dashboard's WebSocket,
// which relays a PTY of the sandbox's agent. Focus it and type; Tab is
// left to move the focus on (so the page stays keyboard-navigable), and
// the line below sends whole commands, also on phones.
export function Terminal(props: { id: string }) {
  const [text, setText] = useState("");
  const [status, setStatus] = useState("connecting…");
  const [line, setLine] = useState("");
  const ws = useRef<WebSocket | null>(null);
  const pre = useRef<HTMLPreElement>(null);

  useEffect(() => {
    const screen = new Screen();
    const decoder = new TextDecoder();
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const sock = new WebSocket(`${proto}//${location.host}${base}api/sandboxes/${props.id}/terminal?csrf=${encodeURIComponent(csrfToken())}`);
    sock.binaryType = "arraybuffer";
    ws.current = sock;
    // The terminal's size follows its element: columns of the monospace
    // font's width, rows of its line height.
    const resize = () => {
      const el = pre.current;
      if (!el || sock.readyState !== WebSocket.OPEN) return;
      const style = getComputedStyle(el);
      const probe = document.createElement("span");
      probe.textContent = "M".repeat(10);
      el.appendChild(probe);
      const cw = probe.getBoundingClientRect().width / 10 || 8;
      el.removeChild(probe);
      const lh = parseFloat(style.lineHeight) || 16;
      const cols = Math.max(20, Math.floor((el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)) / cw));
      const rows = Math.max(5, Math.floor((el.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom)) / lh));
      sock.send(JSON.stringify({ type: "resize", cols, rows }));
    };
    const observer = new ResizeObserver(resize);
    sock.onopen = () => {
      setStatus("connected");
      resize();
      if (pre.current) observer.observe(pre.current);
    };
    sock.onmessage = (ev) => {
      screen.write(typeof ev.data === "string" ? ev.data : decoder.decode(ev.data as ArrayBuffer, { stream: true }));
      setText(screen.lines.join("\n"));
    };
    sock.onclose = () => setStatus("closed");
    return () => {
      observer.disconnect();
      sock.close();
    };
  }, [props.id]);

  useEffect(() => {
    const el = pre.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [text]);

  const send = (data: string) => {
    if (ws.current?.readyState === WebSocket.OPEN) ws.current.send(JSON.stringify({ type: "input", data }));
  };

  const onKey = (e: KeyboardEvent) => {
    if (e.metaKey) return;
    let data = keys[e.key];
    if (!data && e.ctrlKey && /^[a-z]$/i.test(e.key)) data = String.fromCharCode(e.key.toLowerCase().charCodeAt(0) - 96);
    else if (!data && !e.ctrlKey && !e.altKey && e.key.length === 1) data = e.key;
    if (!data) return;
    e.preventDefault();
    send(data);
  };

  return (
    <div class="term-wrap">
      <pre
        class="terminal"
        ref={pre}
        tabIndex={0}
        role="log"
        aria-label={`Terminal (${status}); focus and type`}
        onKeyDown={onKey}
        onPaste={(e) => {
          e.preventDefault();
          send(e.clipboardData?.getData("text") ?? "");
        }}
      >
        {text}
        <span class="cursor" aria-hidden="true">
          {" "}
        </span>
      </pre>
      <form
        class="inline term-line"
        onSubmit={(e) => {
          e.preventDefault();
          send(line + "\r");
          setLine("");
        }}
      >
        <span class={"live " + (status === "connected" ? "on" : "off")}>{status}</span>
        <input aria-label="Command to send to the terminal" placeholder="or type a command here" value={line} onInput={(e) => setLine(e.currentTarget.value)} />
        <button type="submit">Send</button>
      </form>
    </div>
  );
}
