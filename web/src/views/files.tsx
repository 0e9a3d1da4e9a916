import { useEffect, useRef, useState } from "preact/hooks";
import { api, base, csrfToken } from "../api";
import { ErrorNote } from "../components";
import { bytes, time } from "../util";

interface Entry {
  name: string;
  path: string;
  dir: boolean;
  symlink?: boolean;
  size: number;
  mode: string;
  modified: string;
}

// Files browses a running sandbox's files through its agent, as the
// SDK's default user: open directories, download files, upload into the
// directory shown.
export function Files(props: { id: string }) {
  const [dir, setDir] = useState("");
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);

  const open = async (path: string) => {
    setError(null);
    try {
      const res = await api.get<{ path: string; entries: Entry[] }>(`sandboxes/${props.id}/files?path=${encodeURIComponent(path)}`);
      res.entries.sort((a, b) => Number(b.dir) - Number(a.dir) || a.name.localeCompare(b.name));
      setDir(res.path);
      setEntries(res.entries);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  useEffect(() => {
    open("");
  }, [props.id]);

  const upload = async () => {
    const files = input.current?.files;
    if (!files || files.length === 0) return;
    setError(null);
    for (const f of Array.from(files)) {
      const dest = `${dir.replace(/\/$/, "")}/${f.name}`;
      const res = await fetch(`${base}api/sandboxes/${props.id}/files/upload?path=${encodeURIComponent(dest)}`, {
        method: "POST",
        headers: { "Content-Type": "application/octet-stream", "X-Warren-CSRF": csrfToken() },
        body: f,
      });
      if (!res.ok) {
        const body = await res.json().catch(() => null);
        setError(`${f.name}: ${body?.message ?? res.statusText}`);
        return;
      }
      setNotice(`Uploaded ${dest}`);
    }
    if (input.current) input.current.value = "";
    open(dir);
  };

  const parent = dir.replace(/\/[^/]*\/?$/, "") || "/";
  return (
    <div class="files">
      <div class="inline file-bar">
        <span class="mono path" aria-label="Directory">
          {dir}
        </span>
        {dir !== "/" && (
          <button type="button" class="small" onClick={() => open(parent)}>
            Up
          </button>
        )}
        <label class="upload">
          <span class="sr-only">Files to upload</span>
          <input type="file" multiple ref={input} aria-label="Files to upload" />
        </label>
        <button type="button" onClick={upload}>
          Upload here
        </button>
      </div>
      <ErrorNote error={error} />
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {entries && (
        <table class="list file-list">
          <thead>
            <tr>
              <th>Name</th>
              <th>Size</th>
              <th>Mode</th>
              <th>Modified</th>
            </tr>
          </thead>
          <tbody>
            {entries.length === 0 && (
              <tr>
                <td colSpan={4} class="muted">
                  Empty directory.
                </td>
              </tr>
            )}
            {entries.map((e) => (
              <tr key={e.path}>
                <td data-label="Name">
                  {e.dir ? (
                    <button type="button" class="linkish" onClick={() => open(e.path)}>
                      {e.name}/
                    </button>
                  ) : (
                    <a href={`${base}api/sandboxes/${props.id}/files/download?path=${encodeURIComponent(e.path)}`} download={e.name}>
                      {e.name}
                    </a>
                  )}
                </td>
                <td data-label="Size">{e.dir ? "" : bytes(e.size)}</td>
                <td data-label="Mode" class="mono">
                  {e.mode}
                </td>
                <td data-label="Modified">{time(e.modified)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
