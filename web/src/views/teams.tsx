import { useEffect, useState } from "preact/hooks";
import { api, type TeamQuota } from "../api";
import { Confirm, ErrorNote, useList } from "../components";

// The operator's view of every team: what it holds against its limits,
// its quota edited (a field left empty is the server's default, 0 no
// limit), its sandboxes killed at once, and the server's drain mode.

type Field = keyof TeamQuota["quota"];

const fields: [Field, string][] = [
  ["maxSandboxes", "Sandboxes"],
  ["maxVCPUs", "vCPUs"],
  ["maxMemoryMB", "Memory (MiB)"],
  ["maxDiskMB", "Disk (MiB)"],
  ["maxCreatesPerSecond", "Creates a second"],
  ["maxVolumes", "Volumes"],
  ["maxVolumeMB", "Volumes (MiB)"],
];

const limit = (n: number) => (n === 0 ? "∞" : String(n));

export function Teams() {
  const { list, error, act } = useList<TeamQuota>("operator/teams", 5000);
  const [edit, setEdit] = useState<TeamQuota | null>(null);
  const [kill, setKill] = useState<TeamQuota | null>(null);
  const [draining, setDraining] = useState<boolean | null>(null);
  useEffect(() => {
    api.get<{ draining: boolean }>("operator/drain").then((d) => setDraining(d.draining));
  }, []);
  const drain = (on: boolean) =>
    act(async () => setDraining((await api.put<{ draining: boolean }>("operator/drain", { draining: on })).draining));
  return (
    <section>
      <h1>Teams</h1>
      {draining !== null && (
        <div class="notice" role="status" id="drain">
          <p>{draining ? "Draining: new sandboxes are refused (503); running ones are served." : "Serving: sandboxes are created."}</p>
          <button type="button" class={draining ? "primary" : "danger"} onClick={() => drain(!draining)}>
            {draining ? "Stop draining" : "Drain for maintenance"}
          </button>
        </div>
      )}
      <ErrorNote error={error} />
      {list && (
        <table class="list" id="teams">
          <thead>
            <tr>
              <th>Team</th>
              <th>Sandboxes</th>
              <th>vCPUs</th>
              <th>Memory MiB</th>
              <th>Disk MiB</th>
              <th>Creates/s</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((t) => (
              <tr key={t.id}>
                <td data-label="Team">{t.name}</td>
                <td data-label="Sandboxes">
                  {t.usage.sandboxes} / {limit(t.limits.maxSandboxes)}
                </td>
                <td data-label="vCPUs">
                  {t.usage.vcpus} / {limit(t.limits.maxVCPUs)}
                </td>
                <td data-label="Memory MiB">
                  {t.usage.memoryMB} / {limit(t.limits.maxMemoryMB)}
                </td>
                <td data-label="Disk MiB">
                  {t.usage.diskMB} / {limit(t.limits.maxDiskMB)}
                </td>
                <td data-label="Creates/s">{limit(t.limits.maxCreatesPerSecond)}</td>
                <td>
                  <button type="button" class="small" onClick={() => setEdit(t)}>
                    Edit quota
                  </button>{" "}
                  <button type="button" class="danger small" onClick={() => setKill(t)}>
                    Kill all
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {edit && (
        <QuotaForm
          team={edit}
          onSave={(q) => {
            setEdit(null);
            act(() => api.put(`operator/teams/${encodeURIComponent(edit.id)}/quota`, q));
          }}
          onCancel={() => setEdit(null)}
        />
      )}
      {kill && (
        <Confirm
          title={`Kill every sandbox of ${kill.name}?`}
          confirm="Kill all"
          danger
          onConfirm={() => {
            setKill(null);
            act(() => api.post(`operator/teams/${encodeURIComponent(kill.id)}/kill`));
          }}
          onCancel={() => setKill(null)}
        >
          <p>Its running and paused sandboxes are killed now; their files are lost.</p>
        </Confirm>
      )}
    </section>
  );
}

function QuotaForm(props: { team: TeamQuota; onSave: (q: TeamQuota["quota"]) => void; onCancel: () => void }) {
  const [values, setValues] = useState<Record<Field, string>>(
    Object.fromEntries(fields.map(([f]) => [f, props.team.quota[f] === undefined ? "" : String(props.team.quota[f])])) as Record<Field, string>,
  );
  const save = () => {
    const q: TeamQuota["quota"] = {};
    for (const [f] of fields) if (values[f].trim() !== "") q[f] = Number(values[f]);
    props.onSave(q);
  };
  return (
    <Confirm title={`Quota of ${props.team.name}`} confirm="Save" onConfirm={save} onCancel={props.onCancel}>
      <p class="muted">Empty: the server's default ({"--team-max-*"}). 0: no limit.</p>
      {fields.map(([f, label]) => (
        <p key={f}>
          <label for={`quota-${f}`}>{label}</label>{" "}
          <input
            id={`quota-${f}`}
            type="number"
            min={0}
            step={f === "maxCreatesPerSecond" ? "any" : 1}
            value={values[f]}
            placeholder={`default (${limit(props.team.limits[f])})`}
            onInput={(e) => setValues({ ...values, [f]: e.currentTarget.value })}
          />
        </p>
      ))}
    </Confirm>
  );
}
