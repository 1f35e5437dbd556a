module gpucoll.dev/gpucoll

go 1.19
