; Inno Setup 6 script: a Windows installer for Mnemo's PyInstaller onedir build.
;
; UNTESTED: written for Inno Setup 6.2+ and PyInstaller 6 on Windows, but never compiled or run
; (Mnemo's packaging is built and verified on Linux only; see packaging/README.md).
;
; Build, on Windows x64, from the repository root:
;   python -m venv .pkgvenv && .pkgvenv\Scripts\pip install -e . pyinstaller pyinstaller-hooks-contrib
;   .pkgvenv\Scripts\pyinstaller --noconfirm --distpath dist --workpath %TEMP%\mnemo-pyi-work packaging\mnemo.spec
;   set QT_QPA_PLATFORM=offscreen && dist\mnemo\mnemo-cli.exe --self-test --timings
;   "C:\Program Files (x86)\Inno Setup 6\ISCC.exe" /DAppVersion=0.1.0 packaging\windows\mnemo.iss
; (AppVersion: app/__init__.py's __version__.) The installer lands in dist\.
;
; The spec makes two executables in dist\mnemo\: mnemo.exe (windowed: the app, no console) and
; mnemo-cli.exe (console: `mnemo-cli doctor`, `mnemo-cli chat`, ...), sharing _internal\.
; To check on a clean Windows machine before shipping: that the app starts without the
; Visual C++ redistributable installed (llama.cpp and onnxruntime link msvcp140.dll; PyInstaller
; collects it when the build machine has it next to Python, else bundle vc_redist.x64.exe).

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppName "Mnemo"
#define AppExe "mnemo.exe"
; Relative to this script's folder: the PyInstaller onedir output.
#define SourceDir "..\..\dist\mnemo"

[Setup]
; AppId identifies the app for upgrades and uninstall: never change it between versions.
AppId={{2470A5D7-62BD-4927-AF80-C06ECC7A1466}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=Mnemo
AppComments=A local-first chat assistant that remembers. Runs offline.
VersionInfoVersion={#AppVersion}
; Per-user install by default (no administrator rights needed), like the Linux install.sh;
; the user can choose an all-users install in the dialog.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
OutputDir=..\..\dist
OutputBaseFilename=mnemo-{#AppVersion}-windows-x64-setup
; The bundled models (~120 MB) barely compress; lzma2 still shrinks the Python and Qt parts.
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName} {#AppVersion}
; Close a running Mnemo (Restart Manager) before files are replaced on upgrade.
CloseApplications=yes
#ifdef IconFile
; e.g. /DIconFile=%TEMP%\mnemo-pyi-work\icons\mnemo.ico (packaging\make_icons.py writes it)
SetupIconFile={#IconFile}
#endif

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
; The whole onedir folder: mnemo.exe, mnemo-cli.exe and _internal\ (Python, Qt, llama.cpp,
; onnxruntime, the bundled models and resources).
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[InstallDelete]
; An upgrade must not keep libraries or modules that the new version no longer ships.
Type: filesandordirs; Name: "{app}\_internal"

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"; Comment: "Chat with a local language model that remembers"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

; Chats and settings (%LOCALAPPDATA%\Mnemo, from platformdirs) are left in place
; by the uninstaller on purpose: deleting a user's memory is theirs to decide.
