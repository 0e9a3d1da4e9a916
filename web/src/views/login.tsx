import { useEffect, useState } from "preact/hooks";
import { api, ApiError, base, type Session } from "../api";
import { ErrorNote } from "../components";

// Login takes the token of a `warren dashboard` link (in the URL's
// fragment, which browsers never send) or an API key, or sends the
// browser to the identity provider when the server has single sign-on.
export function Login(props: { onLogin: (s: Session) => void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [sso, setSSO] = useState(false);

  const login = async (body: { token?: string; apiKey?: string }) => {
    setBusy(true);
    setError(null);
    try {
      props.onLogin(await api.post<Session>("login", body));
    } catch (e) {
      setError(e instanceof ApiError ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    api
      .get<{ sso: boolean }>("login")
      .then((o) => setSSO(o.sso))
      .catch(() => setSSO(false));
    const m = /(?:^#|&)token=([0-9a-f]+)/.exec(location.hash);
    if (m) {
      history.replaceState(null, "", location.pathname); // the token is single-use: drop it
      login({ token: m[1] });
    }
  }, []);

  return (
    <main class="login">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          login({ apiKey: key.trim() });
        }}
      >
        <h1>Warren</h1>
        <p class="muted">
          Open the link <code>warren dashboard</code> prints, or log in with an API key.
        </p>
        {sso && (
          <button type="button" class="primary" id="sso" onClick={() => location.assign(base + "api/sso/login")}>
            Log in with single sign-on
          </button>
        )}
        <label for="apikey">API key</label>
        <input
          id="apikey"
          type="password"
          autocomplete="current-password"
          placeholder="e2b_…"
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          required
        />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Logging in…" : "Log in"}
        </button>
        <ErrorNote error={error} />
      </form>
    </main>
  );
}
