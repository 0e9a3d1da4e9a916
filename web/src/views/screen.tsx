import { useEffect, useRef, useState } from "preact/hooks";
import type RFB from "@novnc/novnc";
import { base, csrfToken } from "../api";

// Screen shows a desktop sandbox's display live: noVNC's client (loaded
// only here, as a chunk of its own) over the dashboard's WebSocket, which
// relays a VNC server of the sandbox. It only watches until "Take
// control" hands it the mouse and keyboard.
export function Screen(props: { id: string }) {
  const box = useRef<HTMLDivElement>(null);
  const rfb = useRef<RFB | null>(null);
  const [status, setStatus] = useState("connecting…");
  const [control, setControl] = useState(false);

  useEffect(() => {
    let gone = false;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${proto}//${location.host}${base}api/sandboxes/${props.id}/screen?csrf=${encodeURIComponent(csrfToken())}`;
    import("@novnc/novnc")
      .then(({ default: Client }) => {
        if (gone || !box.current) return;
        const r = new Client(box.current, url);
        r.viewOnly = true;
        r.scaleViewport = true;
        r.focusOnClick = false;
        r.addEventListener("connect", () => setStatus("connected"));
        r.addEventListener("disconnect", () => setStatus("disconnected"));
        rfb.current = r;
      })
      .catch((e) => setStatus(`the viewer did not load: ${e}`));
    return () => {
      gone = true;
      rfb.current?.disconnect();
      rfb.current = null;
    };
  }, [props.id]);

  const toggle = () => {
    const r = rfb.current;
    if (!r) return;
    r.viewOnly = control;
    r.focusOnClick = !control;
    if (!control) r.focus();
    setControl(!control);
  };

  return (
    <div class="screen-wrap">
      <div class="actions" role="group" aria-label="Screen">
        <span class="muted" role="status">
          {status}
          {status === "connected" && (control ? " · you control it" : " · view only")}
        </span>
        <button type="button" aria-pressed={control} onClick={toggle} disabled={status !== "connected"}>
          {control ? "Release control" : "Take control"}
        </button>
      </div>
      <div class={control ? "screen control" : "screen"} ref={box} aria-label={`Screen of the sandbox (${status})`} data-status={status} />
    </div>
  );
}
