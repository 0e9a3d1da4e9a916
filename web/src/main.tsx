import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, setSession, whenUnauthorized, type Session } from "./api";
import { Link } from "./components";
import { navigate, usePath } from "./router";
import { Login } from "./views/login";
import { SandboxList } from "./views/sandboxes";
import { SandboxDetail } from "./views/sandbox";
import { Templates, TemplateDetail } from "./views/templates";
import { Snapshots } from "./views/snapshots";
import { Volumes } from "./views/volumes";
import { Keys } from "./views/keys";
import { Server } from "./views/server";
import { Webhooks } from "./views/webhooks";
import { Teams } from "./views/teams";
import "./style.css";

const nav: [string, string][] = [
  ["", "Sandboxes"],
  ["templates", "Templates"],
  ["snapshots", "Snapshots"],
  ["volumes", "Volumes"],
  ["webhooks", "Webhooks"],
  ["keys", "API keys"],
  ["server", "Server"],
];

function App() {
  const path = usePath();
  const [session, setS] = useState<Session | null | undefined>(undefined);

  const loggedIn = (s: Session | null) => {
    setSession(s);
    setS(s);
  };

  useEffect(() => {
    whenUnauthorized(() => loggedIn(null));
    api
      .get<Session | undefined>("session")
      .then((s) => loggedIn(s ?? null))
      .catch(() => loggedIn(null));
  }, []);

  if (session === undefined) return <p class="loading">Loading…</p>;
  if (session === null || path === "login") {
    return (
      <Login
        onLogin={(s) => {
          loggedIn(s);
          if (path === "login") navigate("", true); // else stay on the page asked for
        }}
      />
    );
  }

  const logout = async () => {
    try {
      await api.post("logout");
    } finally {
      loggedIn(null);
      navigate("login", true);
    }
  };

  const section = path.split("/")[0];
  return (
    <div class="shell">
      <header>
        <Link to="" class="brand">
          Warren
        </Link>
        <nav aria-label="Views">
          {(session.operator ? [...nav, ["teams", "Teams"] as [string, string]] : nav).map(([to, label]) => (
            <Link key={to} to={to} aria-current={(section === "sandboxes" ? "" : section) === to ? "page" : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <div class="who">
          <span class="muted" title="team">
            {session.teamName}
          </span>
          <button type="button" onClick={logout} id="logout">
            Log out
          </button>
        </div>
      </header>
      <main>
        <Route path={path} />
      </main>
    </div>
  );
}

function Route(props: { path: string }) {
  const parts = props.path.split("/").filter(Boolean);
  switch (parts[0] ?? "") {
    case "":
      return <SandboxList />;
    case "sandboxes":
      return parts[1] ? <SandboxDetail id={parts[1]} key={parts[1]} /> : <SandboxList />;
    case "templates":
      return parts[1] ? <TemplateDetail id={parts[1]} build={parts[2]} key={parts.join("/")} /> : <Templates />;
    case "snapshots":
      return <Snapshots />;
    case "volumes":
      return <Volumes />;
    case "webhooks":
      return <Webhooks />;
    case "keys":
      return <Keys />;
    case "server":
      return <Server />;
    case "teams":
      return <Teams />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            <Link to="">Back to the sandboxes</Link>
          </p>
        </section>
      );
  }
}

render(<App />, document.getElementById("app")!);
