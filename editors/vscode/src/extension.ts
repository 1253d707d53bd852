// The VS Code client for `dic lsp`: starts the server over stdio for .dist files, and
// serves the server's read-only virtual documents — the stdlib (`dic-stdlib:`), which
// go-to-definition and related information point into, and the explain pages
// (`dic-explain:`), which the diagnostics' code links open.
import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const command = vscode.workspace.getConfiguration("dic").get<string>("path", "dic");
  const serverOptions: ServerOptions = {
    run: { command, args: ["lsp"], transport: TransportKind.stdio },
    debug: { command, args: ["lsp"], transport: TransportKind.stdio },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { language: "dist", scheme: "file" },
      { language: "dist", scheme: "untitled" },
      { language: "dist", scheme: "dic-stdlib" },
    ],
    // This client serves the stdlib and explain pages itself (the provider below); other
    // editors get them as files in dic's cache folder.
    initializationOptions: { readOnlyDocuments: "virtual" },
  };
  client = new LanguageClient("dic", "dic language server", serverOptions, clientOptions);
  const provider: vscode.TextDocumentContentProvider = {
    async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
      const text = await client?.sendRequest<string | null>("dic/virtualDocument", {
        uri: uri.toString(true),
      });
      return text ?? `dic: nothing at ${uri.toString(true)}`;
    },
  };
  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider("dic-stdlib", provider),
    vscode.workspace.registerTextDocumentContentProvider("dic-explain", provider),
  );
  await client.start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
