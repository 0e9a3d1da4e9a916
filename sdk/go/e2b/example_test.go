package e2b_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

// A sandbox from the default template, a command in it, and its end.
func Example() {
	ctx := context.Background()
	client := e2b.NewClient() // E2B_API_KEY, E2B_API_URL... from the environment
	sbx, err := client.Create(ctx, e2b.SandboxOptions{Timeout: 5 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	res, err := sbx.Commands.Run(ctx, "echo hello from $(hostname)", e2b.CommandOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}

func ExampleCommands_Run() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	// Output streams to os.Stdout as it comes; a non-zero exit is a *CommandExitError.
	_, err = sbx.Commands.Run(ctx, "pip install requests", e2b.CommandOptions{Stdout: os.Stdout, Stderr: os.Stderr, Timeout: 2 * time.Minute})
	var exit *e2b.CommandExitError
	if errors.As(err, &exit) {
		fmt.Println("pip failed with code", exit.Result.ExitCode)
	}
}

func ExampleCommands_Start() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	h, err := sbx.Commands.Start(ctx, "cat", e2b.CommandOptions{Stdin: true, Timeout: e2b.NoTimeout})
	if err != nil {
		log.Fatal(err)
	}
	h.SendStdin(ctx, []byte("typed in\n"))
	h.CloseStdin(ctx)
	res, err := h.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}

func ExampleFilesystem_WriteStream() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	if _, err := sbx.Files.WriteStream(ctx, "/home/user/data.csv", strings.NewReader("a,b\n1,2\n"), e2b.WriteOptions{Gzip: true}); err != nil {
		log.Fatal(err)
	}
	r, err := sbx.Files.ReadStream(ctx, "/home/user/data.csv", e2b.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	os.Stdout.ReadFrom(r)
}

func ExampleClient_List() {
	ctx := context.Background()
	client := e2b.NewClient()
	pages := client.List(e2b.ListOptions{
		Metadata: map[string]string{"owner": "alice"},
		States:   []e2b.SandboxState{e2b.StateRunning},
		Limit:    50,
	})
	for pages.HasNext() {
		sandboxes, err := pages.NextItems(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range sandboxes {
			fmt.Println(s.SandboxID, s.TemplateID, s.EndAt)
		}
	}
}

func ExampleClient_Connect() {
	ctx := context.Background()
	client := e2b.NewClient()
	// Resumes the sandbox if it is paused, and keeps it for at least ten more minutes.
	sbx, err := client.Connect(ctx, "isandboxid", e2b.ConnectOptions{Timeout: 10 * time.Minute})
	var gone *e2b.SandboxNotFoundError
	if errors.As(err, &gone) {
		fmt.Println("the sandbox is gone")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sbx.Host(8080))
}

func ExampleSandbox_DownloadURL() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	// A URL any HTTP client can GET for ten minutes, without the sandbox's credentials.
	u, err := sbx.DownloadURL("/home/user/report.pdf", e2b.URLOptions{Expires: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(u)
}

func ExampleSandbox_RunCode() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{Template: e2b.CodeInterpreterTemplate})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	exec, err := sbx.RunCode(ctx, "import math; math.sqrt(2)", e2b.RunCodeOptions{
		OnStdout: func(m e2b.OutputMessage) { fmt.Print(m.Line) },
	})
	if err != nil {
		log.Fatal(err)
	}
	if exec.Error != nil {
		log.Fatalf("the code raised %s", exec.Error)
	}
	fmt.Println(exec.Text())
}

func ExampleClient_BuildTemplate() {
	ctx := context.Background()
	client := e2b.NewClient()
	tpl := e2b.NewTemplate().
		FromTemplate("base").
		AptInstall("jq").
		Copy("app", "/home/user/app", e2b.CopyOptions{User: "user"}).
		SetEnvs(map[string]string{"APP_ENV": "prod"}).
		SetStartCmd("python3 -m http.server 8080", e2b.WaitForPort(8080))
	info, err := client.BuildTemplate(ctx, tpl, "my-app:v1", e2b.BuildOptions{
		OnLog: func(e e2b.BuildLogEntry) { fmt.Println(e.Level, e.Message) },
	})
	if err != nil {
		log.Fatal(err)
	}
	sbx, err := client.Create(ctx, e2b.SandboxOptions{Template: "my-app:v1"})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)
	fmt.Println(info.TemplateID, sbx.Host(8080))
}

func ExampleFilesystem_WatchDir() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	w, err := sbx.Files.WatchDir(ctx, "/home/user", e2b.WatchOptions{Recursive: true, Timeout: e2b.NoTimeout})
	if err != nil {
		log.Fatal(err)
	}
	go sbx.Files.Write(ctx, "/home/user/notes/today.txt", []byte("hello"), e2b.WriteOptions{})
	for ev := range w.Events() {
		fmt.Println(ev.Type, ev.Name)
		if ev.Type == e2b.EventWrite {
			w.Stop()
		}
	}
}

func ExampleVolume() {
	ctx := context.Background()
	client := e2b.NewClient()
	vol, err := client.CreateVolume(ctx, "datasets")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := vol.WriteFile(ctx, "/raw/a.csv", strings.NewReader("x,y\n"), e2b.VolumeWriteOptions{Force: true}); err != nil {
		log.Fatal(err)
	}
	// Every sandbox that mounts the volume sees the file.
	sbx, err := client.Create(ctx, e2b.SandboxOptions{VolumeMounts: map[string]string{"/data": "datasets"}})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)
	b, _ := sbx.Files.Read(ctx, "/data/raw/a.csv", e2b.ReadOptions{})
	fmt.Print(string(b))
}

func Example_errors() {
	ctx := context.Background()
	sbx, err := e2b.NewClient().Create(ctx, e2b.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	_, err = sbx.Files.Read(ctx, "/no/such/file", e2b.ReadOptions{})
	var missing *e2b.FileNotFoundError
	var notFound *e2b.NotFoundError // the class FileNotFoundError extends
	var sandboxErr *e2b.SandboxError
	fmt.Println(errors.As(err, &missing), errors.As(err, &notFound), errors.As(err, &sandboxErr))
}
