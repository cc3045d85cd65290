; ModuleID = 'small.c'
source_filename = "small.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@.str = private unnamed_addr constant [4 x i8] c"%d\0A\00", align 1

; Function Attrs: nounwind uwtable
define dso_local i32 @transform(i32* noundef %0, i32 noundef %1) #0 !dbg !9 {
  %3 = alloca i32*, align 8
  %4 = alloca i32, align 4
  %5 = alloca i32, align 4
  %6 = alloca i32, align 4
  %7 = alloca i32, align 4
  %8 = alloca i32, align 4
  store i32* %0, i32** %3, align 8, !tbaa !12
  store i32 %1, i32* %4, align 4, !tbaa !16
  %9 = bitcast i32* %5 to i8*, !dbg !18
  call void @llvm.lifetime.start.p0i8(i64 4, i8* %9) #3, !dbg !18
  store i32 0, i32* %5, align 4, !dbg !19, !tbaa !16
  %10 = bitcast i32* %6 to i8*, !dbg !20
  call void @llvm.lifetime.start.p0i8(i64 4, i8* %10) #3, !dbg !20
  store i32 0, i32* %6, align 4, !dbg !21, !tbaa !16
  br label %11, !dbg !20

11:                                               ; preds = %70, %2
  %12 = load i32, i32* %6, align 4, !dbg !22, !tbaa !16
  %13 = load i32, i32* %4, align 4, !dbg !23, !tbaa !16
  %14 = icmp slt i32 %12, %13, !dbg !24
  br i1 %14, label %17, label %15, !dbg !25

15:                                               ; preds = %11
  store i32 2, i32* %7, align 4
  %16 = bitcast i32* %6 to i8*, !dbg !25
  call void @llvm.lifetime.end.p0i8(i64 4, i8* %16) #3, !dbg !25
  br label %73

17:                                               ; preds = %11
  %18 = bitcast i32* %8 to i8*, !dbg !26
  call void @llvm.lifetime.start.p0i8(i64 4, i8* %18) #3, !dbg !26
  store i32 0, i32* %8, align 4, !dbg !27, !tbaa !16
  br label %19, !dbg !26

19:                                               ; preds = %66, %17
  %20 = load i32, i32* %8, align 4, !dbg !28, !tbaa !16
  %21 = load i32, i32* %6, align 4, !dbg !29, !tbaa !16
  %22 = icmp slt i32 %20, %21, !dbg !30
  br i1 %22, label %25, label %23, !dbg !31

23:                                               ; preds = %19
  store i32 5, i32* %7, align 4
  %24 = bitcast i32* %8 to i8*, !dbg !31
  call void @llvm.lifetime.end.p0i8(i64 4, i8* %24) #3, !dbg !31
  br label %69

25:                                               ; preds = %19
  %26 = load i32*, i32** %3, align 8, !dbg !32, !tbaa !12
  %27 = load i32, i32* %8, align 4, !dbg !33, !tbaa !16
  %28 = sext i32 %27 to i64, !dbg !32
  %29 = getelementptr inbounds i32, i32* %26, i64 %28, !dbg !32
  %30 = load i32, i32* %29, align 4, !dbg !32, !tbaa !16
  %31 = and i32 %30, 3, !dbg !34
  switch i32 %31, label %55 [
    i32 0, label %32
    i32 1, label %46
  ], !dbg !35

32:                                               ; preds = %25
  %33 = load i32*, i32** %3, align 8, !dbg !36, !tbaa !12
  %34 = load i32, i32* %6, align 4, !dbg !37, !tbaa !16
  %35 = sext i32 %34 to i64, !dbg !36
  %36 = getelementptr inbounds i32, i32* %33, i64 %35, !dbg !36
  %37 = load i32, i32* %36, align 4, !dbg !36, !tbaa !16
  %38 = load i32*, i32** %3, align 8, !dbg !38, !tbaa !12
  %39 = load i32, i32* %8, align 4, !dbg !39, !tbaa !16
  %40 = sext i32 %39 to i64, !dbg !38
  %41 = getelementptr inbounds i32, i32* %38, i64 %40, !dbg !38
  %42 = load i32, i32* %41, align 4, !dbg !38, !tbaa !16
  %43 = call i32 @blend(i32 noundef %37, i32 noundef %42), !dbg !40
  %44 = load i32, i32* %5, align 4, !dbg !41, !tbaa !16
  %45 = add nsw i32 %44, %43, !dbg !41
  store i32 %45, i32* %5, align 4, !dbg !41, !tbaa !16
  br label %65, !dbg !42

46:                                               ; preds = %25
  %47 = load i32*, i32** %3, align 8, !dbg !43, !tbaa !12
  %48 = load i32, i32* %8, align 4, !dbg !44, !tbaa !16
  %49 = sext i32 %48 to i64, !dbg !43
  %50 = getelementptr inbounds i32, i32* %47, i64 %49, !dbg !43
  %51 = load i32, i32* %50, align 4, !dbg !43, !tbaa !16
  %52 = call i32 @clamp(i32 noundef %51, i32 noundef 1, i32 noundef 7), !dbg !45
  %53 = load i32, i32* %5, align 4, !dbg !46, !tbaa !16
  %54 = sub nsw i32 %53, %52, !dbg !46
  store i32 %54, i32* %5, align 4, !dbg !46, !tbaa !16
  br label %65, !dbg !47

55:                                               ; preds = %25
  %56 = load i32*, i32** %3, align 8, !dbg !48, !tbaa !12
  %57 = load i32, i32* %8, align 4, !dbg !49, !tbaa !16
  %58 = sext i32 %57 to i64, !dbg !48
  %59 = getelementptr inbounds i32, i32* %56, i64 %58, !dbg !48
  %60 = load i32, i32* %59, align 4, !dbg !48, !tbaa !16
  %61 = and i32 %60, 7, !dbg !50
  %62 = call i32 @fib(i32 noundef %61), !dbg !51
  %63 = load i32, i32* %5, align 4, !dbg !52, !tbaa !16
  %64 = xor i32 %63, %62, !dbg !52
  store i32 %64, i32* %5, align 4, !dbg !52, !tbaa !16
  br label %65, !dbg !53

65:                                               ; preds = %55, %46, %32
  br label %66, !dbg !53

66:                                               ; preds = %65
  %67 = load i32, i32* %8, align 4, !dbg !54, !tbaa !16
  %68 = add nsw i32 %67, 1, !dbg !54
  store i32 %68, i32* %8, align 4, !dbg !54, !tbaa !16
  br label %19, !dbg !31, !llvm.loop !55

69:                                               ; preds = %23
  br label %70, !dbg !53

70:                                               ; preds = %69
  %71 = load i32, i32* %6, align 4, !dbg !57, !tbaa !16
  %72 = add nsw i32 %71, 1, !dbg !57
  store i32 %72, i32* %6, align 4, !dbg !57, !tbaa !16
  br label %11, !dbg !25, !llvm.loop !58

73:                                               ; preds = %15
  %74 = load i32, i32* %5, align 4, !dbg !59, !tbaa !16
  store i32 1, i32* %7, align 4
  %75 = bitcast i32* %5 to i8*, !dbg !60
  call void @llvm.lifetime.end.p0i8(i64 4, i8* %75) #3, !dbg !60
  ret i32 %74, !dbg !61
}

; Function Attrs: argmemonly nofree nosync nounwind willreturn
declare void @llvm.lifetime.start.p0i8(i64 immarg, i8* nocapture) #1

; Function Attrs: nounwind uwtable
define internal i32 @blend(i32 noundef %0, i32 noundef %1) #0 !dbg !62 {
  %3 = alloca i32, align 4
  %4 = alloca i32, align 4
  store i32 %0, i32* %3, align 4, !tbaa !16
  store i32 %1, i32* %4, align 4, !tbaa !16
  %5 = load i32, i32* %3, align 4, !dbg !63, !tbaa !16
  %6 = load i32, i32* %4, align 4, !dbg !64, !tbaa !16
  %7 = add nsw i32 %5, %6, !dbg !65
  %8 = sdiv i32 %7, 2, !dbg !66
  %9 = call i32 @clamp(i32 noundef %8, i32 noundef 0, i32 noundef 255), !dbg !67
  ret i32 %9, !dbg !68
}

; Function Attrs: nounwind uwtable
define internal i32 @clamp(i32 noundef %0, i32 noundef %1, i32 noundef %2) #0 !dbg !69 {
  %4 = alloca i32, align 4
  %5 = alloca i32, align 4
  %6 = alloca i32, align 4
  store i32 %0, i32* %4, align 4, !tbaa !16
  store i32 %1, i32* %5, align 4, !tbaa !16
  store i32 %2, i32* %6, align 4, !tbaa !16
  %7 = load i32, i32* %4, align 4, !dbg !70, !tbaa !16
  %8 = load i32, i32* %5, align 4, !dbg !71, !tbaa !16
  %9 = icmp slt i32 %7, %8, !dbg !72
  br i1 %9, label %10, label %12, !dbg !70

10:                                               ; preds = %3
  %11 = load i32, i32* %5, align 4, !dbg !73, !tbaa !16
  br label %22, !dbg !70

12:                                               ; preds = %3
  %13 = load i32, i32* %4, align 4, !dbg !74, !tbaa !16
  %14 = load i32, i32* %6, align 4, !dbg !75, !tbaa !16
  %15 = icmp sgt i32 %13, %14, !dbg !76
  br i1 %15, label %16, label %18, !dbg !74

16:                                               ; preds = %12
  %17 = load i32, i32* %6, align 4, !dbg !77, !tbaa !16
  br label %20, !dbg !74

18:                                               ; preds = %12
  %19 = load i32, i32* %4, align 4, !dbg !78, !tbaa !16
  br label %20, !dbg !74

20:                                               ; preds = %18, %16
  %21 = phi i32 [ %17, %16 ], [ %19, %18 ], !dbg !74
  br label %22, !dbg !70

22:                                               ; preds = %20, %10
  %23 = phi i32 [ %11, %10 ], [ %21, %20 ], !dbg !70
  ret i32 %23, !dbg !79
}

; Function Attrs: nounwind uwtable
define internal i32 @fib(i32 noundef %0) #0 !dbg !80 {
  %2 = alloca i32, align 4
  store i32 %0, i32* %2, align 4, !tbaa !16
  %3 = load i32, i32* %2, align 4, !dbg !81, !tbaa !16
  %4 = icmp slt i32 %3, 2, !dbg !82
  br i1 %4, label %5, label %7, !dbg !81

5:                                                ; preds = %1
  %6 = load i32, i32* %2, align 4, !dbg !83, !tbaa !16
  br label %15, !dbg !81

7:                                                ; preds = %1
  %8 = load i32, i32* %2, align 4, !dbg !84, !tbaa !16
  %9 = sub nsw i32 %8, 1, !dbg !85
  %10 = call i32 @fib(i32 noundef %9), !dbg !86
  %11 = load i32, i32* %2, align 4, !dbg !87, !tbaa !16
  %12 = sub nsw i32 %11, 2, !dbg !88
  %13 = call i32 @fib(i32 noundef %12), !dbg !89
  %14 = add nsw i32 %10, %13, !dbg !90
  br label %15, !dbg !81

15:                                               ; preds = %7, %5
  %16 = phi i32 [ %6, %5 ], [ %14, %7 ], !dbg !81
  ret i32 %16, !dbg !91
}

; Function Attrs: argmemonly nofree nosync nounwind willreturn
declare void @llvm.lifetime.end.p0i8(i64 immarg, i8* nocapture) #1

; Function Attrs: nounwind uwtable
define dso_local i32 @main() #0 !dbg !92 {
  %1 = alloca i32, align 4
  %2 = alloca [64 x i32], align 16
  %3 = alloca i32, align 4
  store i32 0, i32* %1, align 4
  %4 = bitcast [64 x i32]* %2 to i8*, !dbg !93
  call void @llvm.lifetime.start.p0i8(i64 256, i8* %4) #3, !dbg !93
  %5 = bitcast i32* %3 to i8*, !dbg !94
  call void @llvm.lifetime.start.p0i8(i64 4, i8* %5) #3, !dbg !94
  store i32 0, i32* %3, align 4, !dbg !95, !tbaa !16
  br label %6, !dbg !94

6:                                                ; preds = %17, %0
  %7 = load i32, i32* %3, align 4, !dbg !96, !tbaa !16
  %8 = icmp slt i32 %7, 64, !dbg !97
  br i1 %8, label %11, label %9, !dbg !98

9:                                                ; preds = %6
  %10 = bitcast i32* %3 to i8*, !dbg !98
  call void @llvm.lifetime.end.p0i8(i64 4, i8* %10) #3, !dbg !98
  br label %20

11:                                               ; preds = %6
  %12 = load i32, i32* %3, align 4, !dbg !99, !tbaa !16
  %13 = mul nsw i32 %12, 37, !dbg !100
  %14 = load i32, i32* %3, align 4, !dbg !101, !tbaa !16
  %15 = sext i32 %14 to i64, !dbg !102
  %16 = getelementptr inbounds [64 x i32], [64 x i32]* %2, i64 0, i64 %15, !dbg !102
  store i32 %13, i32* %16, align 4, !dbg !103, !tbaa !16
  br label %17, !dbg !102

17:                                               ; preds = %11
  %18 = load i32, i32* %3, align 4, !dbg !104, !tbaa !16
  %19 = add nsw i32 %18, 1, !dbg !104
  store i32 %19, i32* %3, align 4, !dbg !104, !tbaa !16
  br label %6, !dbg !98, !llvm.loop !105

20:                                               ; preds = %9
  %21 = getelementptr inbounds [64 x i32], [64 x i32]* %2, i64 0, i64 0, !dbg !107
  %22 = call i32 @transform(i32* noundef %21, i32 noundef 64), !dbg !108
  %23 = call i32 (i8*, ...) @printf(i8* noundef getelementptr inbounds ([4 x i8], [4 x i8]* @.str, i64 0, i64 0), i32 noundef %22), !dbg !109
  %24 = bitcast [64 x i32]* %2 to i8*, !dbg !110
  call void @llvm.lifetime.end.p0i8(i64 256, i8* %24) #3, !dbg !110
  ret i32 0, !dbg !111
}

declare i32 @printf(i8* noundef, ...) #2

attributes #0 = { nounwind uwtable "frame-pointer"="none" "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { argmemonly nofree nosync nounwind willreturn }
attributes #2 = { "frame-pointer"="none" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #3 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7}
!llvm.ident = !{!8}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "Debian clang version 14.0.6", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "small.c", directory: "/tmp/seeds", checksumkind: CSK_MD5, checksum: "4c7d5ac0bbb61774b641c49e5fd9d0df")
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 1, !"wchar_size", i32 4}
!5 = !{i32 7, !"PIC Level", i32 2}
!6 = !{i32 7, !"PIE Level", i32 2}
!7 = !{i32 7, !"uwtable", i32 1}
!8 = !{!"Debian clang version 14.0.6"}
!9 = distinct !DISubprogram(name: "transform", scope: !1, file: !1, line: 5, type: !10, scopeLine: 5, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!10 = !DISubroutineType(types: !11)
!11 = !{}
!12 = !{!13, !13, i64 0}
!13 = !{!"any pointer", !14, i64 0}
!14 = !{!"omnipotent char", !15, i64 0}
!15 = !{!"Simple C/C++ TBAA"}
!16 = !{!17, !17, i64 0}
!17 = !{!"int", !14, i64 0}
!18 = !DILocation(line: 6, column: 5, scope: !9)
!19 = !DILocation(line: 6, column: 9, scope: !9)
!20 = !DILocation(line: 7, column: 10, scope: !9)
!21 = !DILocation(line: 7, column: 14, scope: !9)
!22 = !DILocation(line: 7, column: 21, scope: !9)
!23 = !DILocation(line: 7, column: 25, scope: !9)
!24 = !DILocation(line: 7, column: 23, scope: !9)
!25 = !DILocation(line: 7, column: 5, scope: !9)
!26 = !DILocation(line: 8, column: 14, scope: !9)
!27 = !DILocation(line: 8, column: 18, scope: !9)
!28 = !DILocation(line: 8, column: 25, scope: !9)
!29 = !DILocation(line: 8, column: 29, scope: !9)
!30 = !DILocation(line: 8, column: 27, scope: !9)
!31 = !DILocation(line: 8, column: 9, scope: !9)
!32 = !DILocation(line: 9, column: 21, scope: !9)
!33 = !DILocation(line: 9, column: 24, scope: !9)
!34 = !DILocation(line: 9, column: 27, scope: !9)
!35 = !DILocation(line: 9, column: 13, scope: !9)
!36 = !DILocation(line: 10, column: 32, scope: !9)
!37 = !DILocation(line: 10, column: 35, scope: !9)
!38 = !DILocation(line: 10, column: 39, scope: !9)
!39 = !DILocation(line: 10, column: 42, scope: !9)
!40 = !DILocation(line: 10, column: 26, scope: !9)
!41 = !DILocation(line: 10, column: 23, scope: !9)
!42 = !DILocation(line: 10, column: 47, scope: !9)
!43 = !DILocation(line: 11, column: 32, scope: !9)
!44 = !DILocation(line: 11, column: 35, scope: !9)
!45 = !DILocation(line: 11, column: 26, scope: !9)
!46 = !DILocation(line: 11, column: 23, scope: !9)
!47 = !DILocation(line: 11, column: 46, scope: !9)
!48 = !DILocation(line: 12, column: 31, scope: !9)
!49 = !DILocation(line: 12, column: 34, scope: !9)
!50 = !DILocation(line: 12, column: 37, scope: !9)
!51 = !DILocation(line: 12, column: 27, scope: !9)
!52 = !DILocation(line: 12, column: 24, scope: !9)
!53 = !DILocation(line: 13, column: 13, scope: !9)
!54 = !DILocation(line: 8, column: 33, scope: !9)
!55 = distinct !{!55, !31, !53, !56}
!56 = !{!"llvm.loop.mustprogress"}
!57 = !DILocation(line: 7, column: 29, scope: !9)
!58 = distinct !{!58, !25, !53, !56}
!59 = !DILocation(line: 14, column: 12, scope: !9)
!60 = !DILocation(line: 15, column: 1, scope: !9)
!61 = !DILocation(line: 14, column: 5, scope: !9)
!62 = distinct !DISubprogram(name: "blend", scope: !1, file: !1, line: 3, type: !10, scopeLine: 3, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!63 = !DILocation(line: 3, column: 48, scope: !62)
!64 = !DILocation(line: 3, column: 52, scope: !62)
!65 = !DILocation(line: 3, column: 50, scope: !62)
!66 = !DILocation(line: 3, column: 55, scope: !62)
!67 = !DILocation(line: 3, column: 41, scope: !62)
!68 = !DILocation(line: 3, column: 34, scope: !62)
!69 = distinct !DISubprogram(name: "clamp", scope: !1, file: !1, line: 2, type: !10, scopeLine: 2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!70 = !DILocation(line: 2, column: 50, scope: !69)
!71 = !DILocation(line: 2, column: 54, scope: !69)
!72 = !DILocation(line: 2, column: 52, scope: !69)
!73 = !DILocation(line: 2, column: 59, scope: !69)
!74 = !DILocation(line: 2, column: 64, scope: !69)
!75 = !DILocation(line: 2, column: 68, scope: !69)
!76 = !DILocation(line: 2, column: 66, scope: !69)
!77 = !DILocation(line: 2, column: 73, scope: !69)
!78 = !DILocation(line: 2, column: 78, scope: !69)
!79 = !DILocation(line: 2, column: 43, scope: !69)
!80 = distinct !DISubprogram(name: "fib", scope: !1, file: !1, line: 4, type: !10, scopeLine: 4, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!81 = !DILocation(line: 4, column: 32, scope: !80)
!82 = !DILocation(line: 4, column: 34, scope: !80)
!83 = !DILocation(line: 4, column: 40, scope: !80)
!84 = !DILocation(line: 4, column: 48, scope: !80)
!85 = !DILocation(line: 4, column: 50, scope: !80)
!86 = !DILocation(line: 4, column: 44, scope: !80)
!87 = !DILocation(line: 4, column: 61, scope: !80)
!88 = !DILocation(line: 4, column: 63, scope: !80)
!89 = !DILocation(line: 4, column: 57, scope: !80)
!90 = !DILocation(line: 4, column: 55, scope: !80)
!91 = !DILocation(line: 4, column: 25, scope: !80)
!92 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 16, type: !10, scopeLine: 16, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !11)
!93 = !DILocation(line: 17, column: 5, scope: !92)
!94 = !DILocation(line: 18, column: 10, scope: !92)
!95 = !DILocation(line: 18, column: 14, scope: !92)
!96 = !DILocation(line: 18, column: 21, scope: !92)
!97 = !DILocation(line: 18, column: 23, scope: !92)
!98 = !DILocation(line: 18, column: 5, scope: !92)
!99 = !DILocation(line: 18, column: 42, scope: !92)
!100 = !DILocation(line: 18, column: 44, scope: !92)
!101 = !DILocation(line: 18, column: 37, scope: !92)
!102 = !DILocation(line: 18, column: 34, scope: !92)
!103 = !DILocation(line: 18, column: 40, scope: !92)
!104 = !DILocation(line: 18, column: 30, scope: !92)
!105 = distinct !{!105, !98, !106, !56}
!106 = !DILocation(line: 18, column: 46, scope: !92)
!107 = !DILocation(line: 19, column: 30, scope: !92)
!108 = !DILocation(line: 19, column: 20, scope: !92)
!109 = !DILocation(line: 19, column: 5, scope: !92)
!110 = !DILocation(line: 21, column: 1, scope: !92)
!111 = !DILocation(line: 20, column: 5, scope: !92)
