// The part of noVNC's client (@novnc/novnc, which ships no types) the
// sandbox view's screen uses.
declare module "@novnc/novnc" {
  export default class RFB extends EventTarget {
    constructor(target: HTMLElement, url: string, options?: { wsProtocols?: string[] });
    viewOnly: boolean;
    scaleViewport: boolean;
    focusOnClick: boolean;
    disconnect(): void;
    focus(): void;
  }
}
